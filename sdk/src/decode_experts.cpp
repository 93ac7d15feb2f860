#include "triax/layers/decode_experts.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <vector>

#include "triax/error.hpp"
#include "triax/layers/decode_gemv.hpp"
#include "triax/layers/fused_ops.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {
namespace {

void check_operands(const at::Tensor& x, const at::Tensor& stack, const at::Tensor& experts) {
  if (x.dim() != 2 || stack.dim() != 3 || x.size(1) != stack.size(2) || experts.dim() != 1 ||
      experts.size(0) != x.size(0) || experts.scalar_type() != at::kLong)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "decode experts: expected x [m, in], the experts' stack [E, out, in] and int64 expert indices [m]");
}

// The product on any device: each row's matrix gathered, then one batched product.
at::Tensor gathered_product(const at::Tensor& x, const at::Tensor& stack, const at::Tensor& experts) {
  return at::matmul(x.unsqueeze(1), stack.index_select(0, experts).transpose(1, 2)).squeeze(1);
}

#ifdef TRIAX_WITH_CUDA
// The kernel's [m, out]; undefined where it does not apply.
at::Tensor kernel_product(const at::Tensor& x, const at::Tensor& stack, const at::Tensor& up_stack,
                          const at::Tensor& experts) {
  if (!cuda_launch::kernels_apply({&x, &stack}) || (up_stack.defined() && !cuda_launch::kernels_apply({&x, &up_stack})))
    return {};
  if (!experts.is_cuda() || experts.device() != x.device() || wants_gradient({&x, &stack, &up_stack})) return {};
  if (!x.is_contiguous() || !stack.is_contiguous() || !experts.is_contiguous() ||
      (up_stack.defined() && (!up_stack.is_contiguous() || up_stack.sizes() != stack.sizes())))
    return {};
  const int64_t rows = x.size(0), out = stack.size(1), in = stack.size(2);
  at::Tensor y = at::empty({rows, out}, x.options());  // the allocator's blocks are 512-byte aligned
  const kernels::GemvByExpertOperands operands{x.const_data_ptr(),
                                               stack.const_data_ptr(),
                                               up_stack.defined() ? up_stack.const_data_ptr() : nullptr,
                                               experts.const_data_ptr<int64_t>(),
                                               y.mutable_data_ptr(),
                                               rows,
                                               out,
                                               in,
                                               stack.size(0)};
  if (!kernels::gemv_by_expert_applies(operands, static_cast<int>(x.element_size()))) return {};
  c10::cuda::CUDAGuard device(x.device());
  const kernels::Dtype dtype = *cuda_launch::kernel_dtype(x.scalar_type());
  const cudaStream_t stream = cuda_launch::stream_of(x);
  cuda_launch::check(up_stack.defined() ? kernels::gemv_swiglu_by_expert(dtype, operands, stream)
                                        : kernels::gemv_by_expert(dtype, operands, stream),
                     "decode_experts");
  return y;
}
#endif

}  // namespace

at::Tensor decode_gemv_by_expert(const at::Tensor& x, const at::Tensor& stack, const at::Tensor& experts) {
  check_operands(x, stack, experts);
#ifdef TRIAX_WITH_CUDA
  if (at::Tensor y = kernel_product(x, stack, at::Tensor(), experts); y.defined()) return y;
#endif
  return gathered_product(x, stack, experts);
}

at::Tensor decode_swiglu_by_expert(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                                   const at::Tensor& experts) {
  check_operands(x, gate, experts);
  check_operands(x, up, experts);
  RECORD_FUNCTION("triax::decode_swiglu_by_expert", std::vector<c10::IValue>());  // one kernel on CUDA
#ifdef TRIAX_WITH_CUDA
  if (at::Tensor y = kernel_product(x, gate, up, experts); y.defined()) return y;
#endif
  return swiglu(decode_gemv_by_expert(x, gate, experts), decode_gemv_by_expert(x, up, experts));
}

}  // namespace triax
