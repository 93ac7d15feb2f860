#include "token_major_conv_cuda.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>

#include "token_major_conv_kernels.hpp"
#include "triax/environment_switch.hpp"
#include "triax/kernels/cuda_launch.hpp"

namespace triax::mamba2 {
namespace {

namespace launch = triax::cuda_launch;
using launch::fp32_operand;
using launch::fp32_or_null;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x [b, s, groups, group_conv] with unit channel stride, as the kernels address it.
kernels::TokenMajorInput input_of(const at::Tensor& x) {
  return {x.const_data_ptr(), x.stride(0), x.stride(1), x.stride(2), x.size(3)};
}

// grad_x [b, s, groups, group_conv] (contiguous, or x's slot of in_proj's gradient) as the backward writes it.
kernels::TokenMajorGradient gradient_of(at::Tensor& dx) {
  return {dx.mutable_data_ptr(), dx.stride(0), dx.stride(1), dx.stride(2), dx.size(3)};
}

kernels::TokenMajorConvShape shape_of(const at::Tensor& x, const at::Tensor& weight) {
  return {x.size(0), x.size(1), x.size(2) * x.size(3), weight.size(1)};
}

// Staged loads (token_major_conv_kernels.hpp) unless TRIAX_MAMBA2_CONV_STAGED=0, read at every call
// so that one process can time both.
kernels::TokenMajorConvLoads loads() {
  return switched_on_unless_zero("TRIAX_MAMBA2_CONV_STAGED") ? kernels::TokenMajorConvLoads::kStaged
                                                             : kernels::TokenMajorConvLoads::kDirect;
}

struct TokenMajorConvFunction : torch::autograd::Function<TokenMajorConvFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias_opt,
                            const c10::intrusive_ptr<InProjGradient>& x_gradient) {
    const at::Tensor bias = bias_opt.value_or(at::Tensor());
    c10::cuda::CUDAGuard device(x.device());
    const at::Tensor w = fp32_operand(weight), b = fp32_operand(bias);
    const kernels::TokenMajorConvShape shape = shape_of(x, w);
    at::Tensor y = at::empty({shape.batch, shape.length, shape.channels}, x.options());
    launch::check(kernels::token_major_conv_forward(*launch::kernel_dtype(x.scalar_type()), input_of(x),
                                                    w.const_data_ptr<float>(), fp32_or_null(b), y.mutable_data_ptr(),
                                                    shape, /*silu=*/true, loads(), launch::stream_of(x)),
                  "token_major_conv forward");
    ctx->save_for_backward({x, w, b});  // x: the view of in_proj's output, no copy kept
    ctx->saved_data["weight_type"] = launch::saved_dtype(weight);
    ctx->saved_data["bias_type"] = launch::saved_dtype(bias);
    ctx->saved_data["x_gradient"] = as_saved(x_gradient);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &b = saved[2];
    c10::cuda::CUDAGuard device(x.device());
    const kernels::TokenMajorConvShape shape = shape_of(x, w);
    const at::Tensor grad_y = grads[0].to(x.scalar_type(), false, false, at::MemoryFormat::Contiguous);
    // x's slot of in_proj's gradient where the split lands it (in_proj_gradient.hpp), else contiguous.
    const c10::intrusive_ptr<InProjGradient> x_gradient = from_saved(ctx->saved_data["x_gradient"]);
    at::Tensor dx = x_gradient ? x_gradient->slot_for(x) : at::Tensor();
    if (!dx.defined()) dx = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    at::Tensor partials = at::empty({kernels::token_major_conv_partial_rows(shape), shape.channels, shape.width + 1},
                                    x.options().dtype(at::kFloat));
    launch::check(kernels::token_major_conv_backward(
                      *launch::kernel_dtype(x.scalar_type()), input_of(x), w.const_data_ptr<float>(), fp32_or_null(b),
                      grad_y.const_data_ptr(), gradient_of(dx), partials.mutable_data_ptr<float>(), shape,
                      /*silu=*/true, loads(), launch::stream_of(x)),
                  "token_major_conv backward");
    const at::Tensor sums = partials.sum(0);  // [channels, width + 1]
    return {dx, launch::in_saved_dtype(sums.narrow(1, 0, shape.width), ctx->saved_data["weight_type"].toInt()),
            launch::in_saved_dtype(sums.select(1, shape.width), ctx->saved_data["bias_type"].toInt()), at::Tensor()};
  }
};

}  // namespace

bool token_major_conv_switched_on() { return switched_on_unless_zero("TRIAX_MAMBA2_TOKEN_MAJOR_CONV"); }

bool token_major_conv_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!token_major_conv_switched_on() || !fused_kernels_enabled() || !x.is_cuda() || x.dim() != 4) return false;
  if (!launch::kernel_dtype(x.scalar_type()) || x.stride(3) != 1 || x.size(1) == 0) return false;
  if (weight.dim() != 2 || weight.size(0) != x.size(2) * x.size(3) || weight.size(1) > kernels::kMaxTokenMajorConvWidth)
    return false;
  if (!weight.is_cuda() || weight.device() != x.device()) return false;
  return !bias.defined() || (bias.is_cuda() && bias.device() == x.device());
}

at::Tensor token_major_conv_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                 const c10::intrusive_ptr<InProjGradient>& x_gradient) {
  return TokenMajorConvFunction::apply(x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
                                       x_gradient);
}

}  // namespace triax::mamba2
