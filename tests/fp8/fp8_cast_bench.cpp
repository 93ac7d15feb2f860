// The fp8 casts of a training step, one shape at a time (docs/fp8.md, "The casts, measured"): for
// every tensor the tensorwise recipe casts in a decoder layer of SmolLM-1.7B (mbs 8 x 2048) and
// SmolLM-3B (mbs 4 x 4096), the cast writing both layouts (scale_to_fp8: bf16 read, fp8 row-major
// and transposed written) and the amax pass that a tensor without a producer's amax takes
// (fp8_tensor_scale: bf16 read), in microseconds per call and GB/s of memory traffic. The
// tensors and their formats are those of fp8_linear.cpp: forward inputs and weights in e4m3,
// output gradients in e5m2. Then the rowwise recipe's e4m3 casts of the same tensor, amax and
// cast in one kernel: per row (fp8_rowwise_cast: bf16 read, fp8 row-major written) and per
// column (fp8_group_column_cast, one group: bf16 read twice, the amax's pass and the cast's, fp8
// transposed written). Built only with -DTRIAX_CUDA=ON, not run by ctest:
//
//   fp8_cast_bench [MODEL...]      (1.7b, 3b; both when none is named)
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../gpu_timing.hpp"
#include "bench_shapes.hpp"
#include "triax/kernels/kernels.hpp"

namespace {

namespace kernels = triax::kernels;

struct CastShape {
  const char* model;
  const char* tensor;
  int64_t rows, cols;
  bool e5m2;
};

constexpr int64_t k1p7bTokens = 8 * 2048, k3bTokens = 4 * 4096;
// 1.7b: hidden 2048, 32 heads of 64 (q/k/v 6144), ffn 8192; 3b: hidden 2048, 16 heads and 4 kv
// heads of 128 (q/k/v 3072), ffn 11008.
const CastShape kShapes[] = {
    {"1.7b", "x of qkv, o, gate_up", k1p7bTokens, 2048, false},
    {"1.7b", "x of down", k1p7bTokens, 8192, false},
    {"1.7b", "W qkv", 6144, 2048, false},
    {"1.7b", "W o", 2048, 2048, false},
    {"1.7b", "W gate_up", 16384, 2048, false},
    {"1.7b", "W down", 2048, 8192, false},
    {"1.7b", "gy of qkv", k1p7bTokens, 6144, true},
    {"1.7b", "gy of o, down", k1p7bTokens, 2048, true},
    {"1.7b", "gy of gate_up", k1p7bTokens, 16384, true},
    {"3b", "x of qkv, o, gate_up", k3bTokens, 2048, false},
    {"3b", "x of down", k3bTokens, 11008, false},
    {"3b", "W qkv", 3072, 2048, false},
    {"3b", "W o", 2048, 2048, false},
    {"3b", "W gate_up", 22016, 2048, false},
    {"3b", "W down", 2048, 11008, false},
    {"3b", "gy of qkv", k3bTokens, 3072, true},
    {"3b", "gy of o, down", k3bTokens, 2048, true},
    {"3b", "gy of gate_up", k3bTokens, 22016, true},
};

void report(const CastShape& shape) {
  const auto options = at::TensorOptions().device(at::kCUDA);
  const at::Tensor x = at::randn({shape.rows, shape.cols}, options.dtype(at::kBFloat16));
  const at::Tensor out = at::empty({shape.rows, shape.cols}, options.dtype(at::kByte));
  const at::Tensor out_t = at::empty({shape.cols, shape.rows}, options.dtype(at::kByte));
  const at::Tensor multiplier = at::full({1}, 3.0f, options.dtype(at::kFloat));
  const at::Tensor workspace = at::empty({kernels::kFp8ScaleBlocks + 1}, options.dtype(at::kFloat));
  const at::Tensor scales = at::empty({3}, options.dtype(at::kFloat));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const double cast_ms = triax::bench::time_ms([&] {
    kernels::scale_to_fp8(kernels::Dtype::BFloat16, x.data_ptr(), multiplier.data_ptr<float>(), 0, 0, shape.e5m2,
                          out.data_ptr(), out_t.data_ptr(), shape.rows, shape.cols, stream);
  });
  const double amax_ms = triax::bench::time_ms([&] {
    kernels::fp8_tensor_scale(kernels::Dtype::BFloat16, x.data_ptr(), x.numel(), 448.0f, 1e-12f,
                              workspace.data_ptr<float>(), scales.data_ptr<float>(), stream);
  });
  const at::Tensor row_scales = at::empty({shape.rows}, options.dtype(at::kFloat));
  const at::Tensor column_scales = at::empty({shape.cols}, options.dtype(at::kFloat));
  const at::Tensor column_multipliers = at::empty({shape.cols}, options.dtype(at::kFloat));
  const kernels::StackedRows rows{x.data_ptr(), shape.rows};
  const double per_row_ms = triax::bench::time_ms([&] {
    kernels::fp8_rowwise_cast(kernels::Dtype::BFloat16, rows, shape.rows, shape.cols, 448.0f, 1e-12f, out.data_ptr(),
                              row_scales.data_ptr<float>(), stream);
  });
  const double per_column_ms = triax::bench::time_ms([&] {
    kernels::fp8_group_column_cast(kernels::Dtype::BFloat16, rows, shape.rows, shape.cols, {nullptr, shape.rows, 1},
                                   false, 448.0f, 1e-12f, column_multipliers.data_ptr<float>(), out_t.data_ptr(),
                                   column_scales.data_ptr<float>(), stream);
  });
  // bytes / (ms x 1e6) = GB/s
  const double elements = static_cast<double>(x.numel()), per_ms = elements / 1e6;
  std::printf(
      "%-4s %-22s [%6lld, %6lld] %s  cast %7.1f us %5.0f GB/s  amax %7.1f us %5.0f GB/s  "
      "rowwise per row %7.1f us %5.0f GB/s, per column %7.1f us %5.0f GB/s\n",
      shape.model, shape.tensor, static_cast<long long>(shape.rows), static_cast<long long>(shape.cols),
      shape.e5m2 ? "e5m2" : "e4m3", cast_ms * 1e3, per_ms * 4 / cast_ms, amax_ms * 1e3, per_ms * 2 / amax_ms,
      per_row_ms * 1e3, per_ms * 3 / per_row_ms, per_column_ms * 1e3, per_ms * 5 / per_column_ms);
}

}  // namespace

int main(int argc, char** argv) {
  return triax::bench::report_models(
      argc, argv, "fp8_cast_bench",
      "fp8 casts (bf16 in, fp8 row-major and transposed out) and amax passes (bf16 in), per call", {"1.7b", "3b"},
      kShapes, report);
}
