// add_to_fp32_residual: the CUDA autograd function over residual_add.cu's kernel, else the
// LibTorch add.
#include "triax/layers/fp32_residual_add.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <vector>

#include "triax/error.hpp"
#include "triax/tensor_text.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {
namespace {

#ifdef TRIAX_WITH_CUDA
// The add's gradient: grad for the residual, grad cast to y's dtype for y (as autograd's own).
struct AddToFp32ResidualFunction : torch::autograd::Function<AddToFp32ResidualFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& residual, const at::Tensor& y) {
    c10::cuda::CUDAGuard device(residual.device());
    const at::Tensor rc = residual.contiguous(), yc = y.contiguous();
    at::Tensor out = at::empty(rc.sizes(), rc.options());
    cuda_launch::check(kernels::add_to_fp32_residual(
                           *cuda_launch::kernel_dtype(yc.scalar_type()), rc.const_data_ptr<float>(),
                           yc.const_data_ptr(), out.mutable_data_ptr<float>(), rc.numel(), cuda_launch::stream_of(rc)),
                       "add_to_fp32_residual");
    ctx->saved_data["y_dtype"] = cuda_launch::saved_dtype(y);
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], cuda_launch::in_saved_dtype(grads[0], ctx->saved_data["y_dtype"].toInt())};
  }
};
#endif  // TRIAX_WITH_CUDA

}  // namespace

at::Tensor add_to_fp32_residual(const at::Tensor& residual, const at::Tensor& y) {
  RECORD_FUNCTION("triax::add_to_fp32_residual", std::vector<c10::IValue>());  // one kernel on CUDA
  if (residual.scalar_type() != at::kFloat || residual.sizes() != y.sizes())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "add_to_fp32_residual: residual " + shape_text(residual.sizes()) + " " +
                                                  c10::toString(residual.scalar_type()) +
                                                  " must be fp32 of y's shape " + shape_text(y.sizes()));
#ifdef TRIAX_WITH_CUDA
  if (residual.numel() > 0 && residual.is_cuda() && cuda_launch::kernels_apply({&y}) && y.device() == residual.device())
    return AddToFp32ResidualFunction::apply(residual, y);
#endif
  return residual + y;
}

}  // namespace triax
