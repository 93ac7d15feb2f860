#include "triax/layers/decode_gemv.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>

#include <vector>

#include "triax/environment_switch.hpp"
#include "triax/layers/fused_ops.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {
namespace {

#ifdef TRIAX_WITH_CUDA
static_assert(kDecodeGemvMaxRows == kernels::kGemvMaxRows);

bool switched_on() {
  static const bool on = switched_on_unless_zero("TRIAX_DECODE_GEMV");
  return on;
}

using GemvLauncher = cudaError_t (*)(kernels::Dtype, const void*, const void*, void*, int64_t, int64_t, int64_t,
                                     cudaStream_t);

// gemv() and gemv_swiglu() as norm_gemv.cu's kernel launches them without a norm: programmatically
// dependent on the kernel before them (TRIAX_DECODE_GEMV_PDL=1).
template <bool kSwiglu>
cudaError_t programmatic_gemv(kernels::Dtype dtype, const void* x, const void* w, void* y, int64_t rows,
                              int64_t out_features, int64_t in_features, cudaStream_t stream) {
  kernels::NormGemvOperands operands{x, nullptr, nullptr, nullptr, 0.f, w, y, rows, out_features, in_features};
  operands.programmatic_launch = true;
  return kSwiglu ? kernels::norm_gemv_swiglu(dtype, operands, stream) : kernels::norm_gemv(dtype, operands, stream);
}

// x [..., in] times `matrix` [rows_per_output x out, in] through `launch` into [..., out]; undefined
// where the kernel does not apply.
at::Tensor run_gemv(const at::Tensor& x, const at::Tensor& matrix, int64_t rows_per_output, GemvLauncher launch,
                    const char* what) {
  if (!switched_on() || x.dim() < 1 || matrix.dim() != 2 || x.size(-1) != matrix.size(1)) return {};
  if (wants_gradient({&x, &matrix}) || !x.is_contiguous() || !matrix.is_contiguous()) return {};
  if (!cuda_launch::kernels_apply({&x, &matrix})) return {};
  const int64_t in = matrix.size(1), out = matrix.size(0) / rows_per_output, rows = in == 0 ? 0 : x.numel() / in;
  if (!kernels::gemv_applies(rows, in, static_cast<int>(x.element_size()), x.const_data_ptr(), matrix.const_data_ptr(),
                             x.const_data_ptr()))
    return {};
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  at::Tensor y = at::empty(shape, x.options());  // the allocator's blocks are 512-byte aligned
  c10::cuda::CUDAGuard device(x.device());
  cuda_launch::check(launch(*cuda_launch::kernel_dtype(x.scalar_type()), x.const_data_ptr(), matrix.const_data_ptr(),
                            y.mutable_data_ptr(), rows, out, in, cuda_launch::stream_of(x)),
                     what);
  return y;
}
#endif

}  // namespace

bool wants_gradient(std::initializer_list<const at::Tensor*> operands) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : operands)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool decode_gemv_programmatic_launch() {
  static const bool on = switched_on_when_one("TRIAX_DECODE_GEMV_PDL");
  return on;
}

at::Tensor decode_gemv([[maybe_unused]] const at::Tensor& x, [[maybe_unused]] const at::Tensor& matrix) {
#ifdef TRIAX_WITH_CUDA
  if (decode_gemv_programmatic_launch()) return run_gemv(x, matrix, 1, programmatic_gemv<false>, "decode_gemv");
  // Long rows (down_proj's) split over a block's warps: 1.7b batch-1 decode 1.005x
  // (generation-performance.md). TRIAX_DECODE_GEMV_SPLIT_K=0 keeps a warp per feature (read at
  // every call, so that one test process compares both).
  if (switched_on_unless_zero("TRIAX_DECODE_GEMV_SPLIT_K"))
    return run_gemv(x, matrix, 1, kernels::gemv_long_rows, "decode_gemv");
  return run_gemv(x, matrix, 1, kernels::gemv, "decode_gemv");
#else
  return {};
#endif
}

at::Tensor decode_gate_up_swiglu(const at::Tensor& x, const at::Tensor& matrix) {
  if (x.dim() < 1 || matrix.dim() != 2 || matrix.size(0) % 2 != 0 || wants_gradient({&x, &matrix})) return {};
  if (x.size(-1) == 0 || x.numel() / x.size(-1) > kDecodeGemvMaxRows) return {};
  RECORD_FUNCTION("triax::decode_gate_up_swiglu", std::vector<c10::IValue>());  // one kernel on CUDA
#ifdef TRIAX_WITH_CUDA
  const GemvLauncher launcher = decode_gemv_programmatic_launch() ? programmatic_gemv<true> : kernels::gemv_swiglu;
  if (at::Tensor fused = run_gemv(x, matrix, 2, launcher, "decode_gate_up_swiglu"); fused.defined()) return fused;
#endif
  return swiglu_halves(at::linear(x, matrix));
}

}  // namespace triax
