// linear(activation(x), weight) as one autograd function that keeps x and the weight only.
#include "triax/layers/recomputed_activation.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <tuple>

#include "deferred_weight.hpp"
#include "triax/error.hpp"
#include "triax/layers/deferred_weight_gradients.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/tensor_text.hpp"

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct RecomputedActivationLinear : torch::autograd::Function<RecomputedActivationLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, int64_t activation,
                            const detail::DeferredWeight& deferred) {
    deferred.save(ctx);
    ctx->saved_data["activation"] = activation;
    ctx->save_for_backward({x, weight});
    // Autograd is off inside a custom forward: the activation's output is freed once the GEMM has read it.
    return at::linear(apply_activation(static_cast<RecomputedActivation>(activation), x), weight);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[1];
    const at::Tensor& grad_y = grads[0];
    if (!grad_y.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const auto activation = static_cast<RecomputedActivation>(ctx->saved_data["activation"].toInt());
    const at::Tensor& input = saved[0];
    const detail::DeferredWeight deferred = detail::DeferredWeight::saved(ctx);
    const bool want_input = ctx->needs_input_grad(0), want_weight = ctx->needs_input_grad(1) && !deferred.active();
    at::Tensor grad_input, activated;
    if (want_input && activation == RecomputedActivation::SwigluHalves) {
      // The activation's gradient first: then one pass over the input yields both the input's
      // gradient and the activation that the weight's gradient needs.
      std::tie(grad_input, activated) = swiglu_halves_backward_and_output(input, at::matmul(grad_y, weight));
    } else if (want_input) {
      const at::Tensor leaf = input.detach().requires_grad_(true);
      {
        at::AutoGradMode enable(true);
        activated = apply_activation(activation, leaf);
      }
      grad_input = torch::autograd::grad({activated}, {leaf}, {at::matmul(grad_y, weight)})[0];
      activated = activated.detach();
    } else if (want_weight) {
      activated = apply_activation(activation, input);
    }
    // grad_y [rows, out] times the weight for the input; for the weight the product autograd takes
    // for at::linear's backward (linear_weight_gradient). Deferred, the activation runs again in W
    // rather than stay alive until then.
    const int64_t out = weight.size(0), in = weight.size(1);
    at::Tensor grad_weight;
    if (want_weight)
      grad_weight = linear_weight_gradient(grad_y.reshape({-1, out}), activated.reshape({-1, in}), weight);
    if (deferred.active())
      deferred.defer([rows_grad = grad_y.reshape({-1, out}), input, weight, activation, in] {
        return linear_weight_gradient(rows_grad, apply_activation(activation, input).reshape({-1, in}), weight);
      });
    return {grad_input, grad_weight, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor apply_activation(RecomputedActivation activation, const at::Tensor& x) {
  switch (activation) {
    case RecomputedActivation::SwigluHalves:
      return swiglu_halves(x);
    case RecomputedActivation::GeluTanh:
      return at::gelu(x, "tanh");
  }
  throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "apply_activation: unknown activation " +
                                                std::to_string(static_cast<int>(activation)));
}

at::Tensor linear_of_recomputed_activation(RecomputedActivation activation, const at::Tensor& x,
                                           const at::Tensor& weight) {
  const int64_t activated_width =
      x.dim() == 0 ? 0 : (activation == RecomputedActivation::SwigluHalves ? x.size(-1) / 2 : x.size(-1));
  if (weight.dim() != 2 || x.dim() < 1 || activated_width != weight.size(1) ||
      (activation == RecomputedActivation::SwigluHalves && x.size(-1) % 2 != 0))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "linear_of_recomputed_activation: x " + shape_text(x.sizes()) + " does not feed weight " +
                    shape_text(weight.sizes()) + " ([out, in]; x [..., in], or [..., 2 in] for SwiGLU's halves)");
  const detail::DeferredWeight deferred = detail::DeferredWeight::of(x, weight);
  return RecomputedActivationLinear::apply(x, deferred.operand(), static_cast<int64_t>(activation), deferred);
}

}  // namespace triax
