#include "triax/layers/decode_norm_gemv.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <vector>

#include "triax/environment_switch.hpp"
#include "triax/layers/decode_gemv.hpp"
#include "triax/layers/fused_ops.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {
namespace {

// The operands' shapes as the fold takes them: residual (and pending) [..., in] of at most
// kDecodeGemvMaxRows rows, norm_weight [in], matrix [out (x 2), in], all contiguous.
bool shapes_fold(const ResidualStream& stream, const at::Tensor& norm_weight, const at::Tensor& matrix,
                 DecodeProduct kind) {
  const at::Tensor& x = stream.residual;
  if (!x.defined() || !matrix.defined() || !norm_weight.defined() || x.dim() < 1 || matrix.dim() != 2) return false;
  const int64_t in = x.size(-1);
  if (in == 0 || matrix.size(1) != in || norm_weight.dim() != 1 || norm_weight.size(0) != in) return false;
  if (x.numel() / in > kDecodeGemvMaxRows || (kind == DecodeProduct::GateUpSwiglu && matrix.size(0) % 2 != 0))
    return false;
  if (stream.pending.defined() && (stream.pending.sizes() != x.sizes() || !stream.pending.is_contiguous()))
    return false;
  return x.is_contiguous() && norm_weight.is_contiguous() && matrix.is_contiguous();
}

}  // namespace

bool decode_norm_gemv_switched_on() {
  static const bool on = switched_on_when_one("TRIAX_DECODE_NORM_GEMV") && switched_on_unless_zero("TRIAX_DECODE_GEMV");
  return on && fused_kernels_enabled();
}

NormedProduct decode_norm_gemv(const ResidualStream& stream, const at::Tensor& norm_weight, double eps,
                               const at::Tensor& matrix, DecodeProduct kind) {
  if (!decode_norm_gemv_switched_on() || !shapes_fold(stream, norm_weight, matrix, kind)) return {};
  if (wants_gradient({&stream.residual, &stream.pending, &norm_weight, &matrix})) return {};
#ifdef TRIAX_WITH_CUDA
  const at::Tensor& x = stream.residual;
  const at::Tensor& pending = stream.pending;
  if (!cuda_launch::kernels_apply({&x, &norm_weight, &matrix}) ||
      (pending.defined() && !cuda_launch::kernels_apply({&x, &pending})))
    return {};
  const int64_t in = x.size(-1), rows = x.numel() / in;
  const int64_t out = kind == DecodeProduct::GateUpSwiglu ? matrix.size(0) / 2 : matrix.size(0);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  // The allocator's blocks are 512-byte aligned.
  const at::Tensor sum = pending.defined() ? at::empty_like(x) : x;
  at::Tensor y = at::empty(shape, x.options());
  const kernels::NormGemvOperands operands{x.const_data_ptr(),
                                           pending.defined() ? pending.const_data_ptr() : nullptr,
                                           pending.defined() ? sum.mutable_data_ptr() : nullptr,
                                           norm_weight.const_data_ptr(),
                                           static_cast<float>(eps),
                                           matrix.const_data_ptr(),
                                           y.mutable_data_ptr(),
                                           rows,
                                           out,
                                           in,
                                           decode_gemv_programmatic_launch()};
  if (!kernels::norm_gemv_applies(operands, static_cast<int>(x.element_size()))) return {};
  RECORD_FUNCTION("triax::decode_norm_gemv", std::vector<c10::IValue>());  // one kernel: one op of a step
  c10::cuda::CUDAGuard device(x.device());
  const kernels::Dtype dtype = *cuda_launch::kernel_dtype(x.scalar_type());
  const cudaError_t status = kind == DecodeProduct::GateUpSwiglu
                                 ? kernels::norm_gemv_swiglu(dtype, operands, cuda_launch::stream_of(x))
                                 : kernels::norm_gemv(dtype, operands, cuda_launch::stream_of(x));
  cuda_launch::check(status, "decode_norm_gemv");
  return {sum, y};
#else
  (void)eps;
  return {};
#endif
}

}  // namespace triax
