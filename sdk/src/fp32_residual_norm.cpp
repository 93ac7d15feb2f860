// rms_norm_of_fp32_residual: the CUDA autograd function over rms_norm.cu's fp32-input kernels,
// else the composition.
#include "triax/layers/fp32_residual_norm.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <string>
#include <vector>

#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/tensor_text.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {
namespace {

#ifdef TRIAX_WITH_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
namespace launch = cuda_launch;

// Outputs {residual, its norm}; backward: the residual's gradient (fp32) and the weight's, in one
// norm backward that adds the residual output's gradient to the norm's.
struct RmsNormOfFp32ResidualFunction : torch::autograd::Function<RmsNormOfFp32ResidualFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& residual, const at::Tensor& weight, double eps) {
    c10::cuda::CUDAGuard device(residual.device());
    const at::Tensor rc = residual.contiguous(), wc = weight.contiguous();
    const int64_t hidden = wc.numel(), rows = rc.numel() / hidden;
    at::Tensor normed = at::empty(rc.sizes(), wc.options());
    // The residual in the weight's dtype, for backward (an fp32 weight: the residual itself).
    const at::Tensor rounded = wc.scalar_type() == at::kFloat ? rc : at::empty(rc.sizes(), wc.options());
    at::Tensor rstd = at::empty({rows}, rc.options());
    launch::check(kernels::rms_norm_forward_fp32_input(
                      *launch::kernel_dtype(wc.scalar_type()), rc.const_data_ptr<float>(), wc.const_data_ptr(),
                      normed.mutable_data_ptr(), rounded.data_ptr(), rstd.mutable_data_ptr<float>(), rows, hidden,
                      static_cast<float>(eps), launch::stream_of(rc)),
                  "rms_norm_of_fp32_residual forward");
    // The rounded residual, not the fp32 one: the bytes the unfused block's cast kept.
    ctx->save_for_backward({rounded, wc, rstd});
    // residual itself: autograd returns it as a view whose gradient comes to backward's grads[0].
    return {residual, normed};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &rstd = saved[2];
    c10::cuda::CUDAGuard device(x.device());
    const at::Tensor grad_y = grads[1].contiguous();
    // The residual output's gradient, fp32 as that output (undefined: none reached it).
    const at::Tensor direct = grads[0].defined() ? grads[0].contiguous() : grads[0];
    const int64_t hidden = weight.numel(), rows = x.numel() / hidden;
    at::Tensor grad_x = at::empty(x.sizes(), x.options().dtype(at::kFloat));
    at::Tensor partials = at::empty({kernels::rms_norm_weight_partials(rows), hidden}, x.options().dtype(at::kFloat));
    at::Tensor grad_weight = at::empty(weight.sizes(), weight.options());
    launch::check(
        kernels::rms_norm_backward_fp32_input(*launch::kernel_dtype(weight.scalar_type()), grad_y.const_data_ptr(),
                                              x.const_data_ptr(), weight.const_data_ptr(), rstd.const_data_ptr<float>(),
                                              direct.defined() ? direct.const_data_ptr<float>() : nullptr,
                                              grad_x.mutable_data_ptr<float>(), partials.mutable_data_ptr<float>(),
                                              grad_weight.mutable_data_ptr(), rows, hidden, launch::stream_of(x)),
        "rms_norm_of_fp32_residual backward");
    return {grad_x, grad_weight, at::Tensor()};
  }
};

bool kernel_applies(const at::Tensor& residual, const at::Tensor& weight) {
  return residual.numel() > 0 && residual.is_cuda() && residual.scalar_type() == at::kFloat &&
         launch::kernels_apply({&weight}) && weight.device() == residual.device();
}
#endif  // TRIAX_WITH_CUDA

}  // namespace

std::pair<at::Tensor, at::Tensor> rms_norm_of_fp32_residual(const at::Tensor& residual, const at::Tensor& weight,
                                                            double eps) {
  RECORD_FUNCTION("triax::rms_norm_of_fp32_residual", std::vector<c10::IValue>());  // one kernel on CUDA
  if (residual.dim() < 1 || weight.dim() != 1 || residual.size(-1) != weight.size(0))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "rms_norm_of_fp32_residual: weight " + shape_text(weight.sizes()) +
                                                  " does not match the last dim of the residual " +
                                                  shape_text(residual.sizes()));
#ifdef TRIAX_WITH_CUDA
  if (kernel_applies(residual, weight)) {
    const variable_list outputs = RmsNormOfFp32ResidualFunction::apply(residual, weight, eps);
    return {outputs[0], outputs[1]};
  }
#endif
  return {residual, rms_norm(residual.to(weight.scalar_type()), weight, eps)};
}

}  // namespace triax
