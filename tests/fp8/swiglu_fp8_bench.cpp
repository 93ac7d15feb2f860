// SwiGLU's backward for the gate/up product, per call (docs/fp8.md, "SwiGLU's gradient in fp8"):
// the gradient written in bf16 with its amax recorded, then cast to fp8 in both layouts
// (TRIAX_FP8_SWIGLU_GRAD_FP8=0), against the amax pass then the gradient written in fp8 directly
// (the default). Each: its launches as the step makes them (slots zeroed, the scale from the
// slots), in microseconds and GB/s of memory traffic, at the gate/up shapes of SmolLM-1.7B
// (mbs 8 x 2048, ffn 8192) and SmolLM-3B (mbs 4 x 4096, ffn 11008). Built only with
// -DTRIAX_CUDA=ON, not run by ctest:
//
//   swiglu_fp8_bench [MODEL...]      (1.7b, 3b; both when none is named)
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstdio>

#include "../gpu_timing.hpp"
#include "bench_shapes.hpp"
#include "triax/kernels/kernels.hpp"

namespace {

namespace kernels = triax::kernels;

struct GateUpShape {
  const char* model;
  int64_t rows, cols;  // tokens, ffn (the gradient is [rows, 2 cols])
};

const GateUpShape kShapes[] = {{"1.7b", 8 * 2048, 8192}, {"3b", 4 * 4096, 11008}};

void report(const GateUpShape& shape) {
  const auto options = at::TensorOptions().device(at::kCUDA);
  const int64_t rows = shape.rows, cols = shape.cols;
  const at::Tensor gate_up = at::randn({rows, 2 * cols}, options.dtype(at::kBFloat16));
  const at::Tensor grad_y = at::randn({rows, cols}, options.dtype(at::kBFloat16));
  const at::Tensor grad = at::empty({rows, 2 * cols}, options.dtype(at::kBFloat16));
  const at::Tensor out = at::empty({rows, 2 * cols}, options.dtype(at::kByte));
  const at::Tensor out_t = at::empty({2 * cols, rows}, options.dtype(at::kByte));
  const at::Tensor slots = at::zeros({kernels::kAmaxSlots}, options.dtype(at::kFloat));
  const at::Tensor scales = at::empty({3}, options.dtype(at::kFloat));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const auto dtype = kernels::Dtype::BFloat16;
  const char* gate = static_cast<const char*>(gate_up.data_ptr());
  const char* up = gate + cols * gate_up.element_size();
  char* grad_gate = static_cast<char*>(grad.data_ptr());
  auto scale = [&] {
    kernels::fp8_scale_from_amax_slots(slots.data_ptr<float>(), 57344.0f, 1e-12f, scales.data_ptr<float>(), stream);
  };
  const double cast_ms = triax::bench::time_ms([&] {
    cudaMemsetAsync(slots.data_ptr(), 0, slots.nbytes(), stream);
    kernels::swiglu_backward(dtype, grad_y.data_ptr(), cols, gate, up, grad_gate, grad_gate + cols * 2, nullptr,
                             2 * cols, slots.data_ptr<float>(), rows, cols, stream);
    scale();
    kernels::scale_to_fp8(dtype, grad.data_ptr(), scales.data_ptr<float>() + 1, 0, 0, true, out.data_ptr(),
                          out_t.data_ptr(), rows, 2 * cols, stream);
  });
  const double direct_ms = triax::bench::time_ms([&] {
    cudaMemsetAsync(slots.data_ptr(), 0, slots.nbytes(), stream);
    kernels::swiglu_backward(dtype, grad_y.data_ptr(), cols, gate, up, nullptr, nullptr, nullptr, 2 * cols,
                             slots.data_ptr<float>(), rows, cols, stream);
    scale();
    kernels::swiglu_backward_to_fp8(dtype, grad_y.data_ptr(), gate, up, 2 * cols, scales.data_ptr<float>() + 1, true,
                                    out.data_ptr(), out_t.data_ptr(), rows, cols, stream);
  });
  const double n = static_cast<double>(rows * cols);  // grad_y's elements; gate_up and the gradient have 2 n
  // Bytes: backward 2n + 4n read, 4n written; cast 4n read, 2n + 2n written. Direct: 6n read (amax), then
  // 6n read, 2n + 2n written. bytes / (ms x 1e6) = GB/s.
  const double cast_bytes = n * (6 + 4 + 4 + 4), direct_bytes = n * (6 + 6 + 4);
  std::printf(
      "%-4s gate/up gradient [%6lld, %6lld]  bf16 + cast %8.1f us %7.0f GB/s   fp8 direct %8.1f us %7.0f GB/s"
      "   %.2fx\n",
      shape.model, static_cast<long long>(rows), static_cast<long long>(2 * cols), cast_ms * 1e3,
      cast_bytes / (cast_ms * 1e6), direct_ms * 1e3, direct_bytes / (direct_ms * 1e6), cast_ms / direct_ms);
}

}  // namespace

int main(int argc, char** argv) {
  return triax::bench::report_models(argc, argv, "swiglu_fp8_bench",
                                     "SwiGLU's backward into gate/up's fp8 operands: bf16 then cast, or fp8 directly",
                                     {"1.7b", "3b"}, kShapes, report);
}
