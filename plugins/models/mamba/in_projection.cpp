#include "in_projection.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "channel_major_products.hpp"

namespace triax::mamba {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct InProjectionFunction : torch::autograd::Function<InProjectionFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight) {
    ctx->save_for_backward({input, weight});
    const at::Tensor channel_major = input.transpose(1, 2);  // [b, h, s], read in place by the GEMM
    const int64_t batch = input.size(0);
    return {at::bmm(shared_over_batch(weight[0], batch), channel_major),
            at::bmm(shared_over_batch(weight[1], batch), channel_major)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1];
    const int64_t batch = input.size(0);
    at::Tensor grad_input, grad_weight;
    if (ctx->needs_input_grad(0)) {
      // [b, s, d] x [b, d, h] per half, the second accumulated into the first by the GEMM.
      for (int part = 0; part < 2; ++part) {
        if (!grads[part].defined()) continue;
        const at::Tensor grad_t = grads[part].transpose(1, 2), matrix = shared_over_batch(weight[part], batch);
        grad_input = grad_input.defined() ? grad_input.baddbmm_(grad_t, matrix) : at::bmm(grad_t, matrix);
      }
    }
    if (ctx->needs_input_grad(1)) {
      grad_weight = at::empty_like(weight);  // each half written by its sum, in place
      for (int part = 0; part < 2; ++part) {
        at::Tensor half = grad_weight[part];
        if (grads[part].defined())
          at::sum_out(half, at::bmm(grads[part], input), {0});
        else
          half.zero_();
      }
    }
    return {grad_input, grad_weight};
  }
};

}  // namespace

std::pair<at::Tensor, at::Tensor> in_projection(const at::Tensor& input, const at::Tensor& weight) {
  const variable_list out = InProjectionFunction::apply(input, weight);
  return {out[0], out[1]};
}

}  // namespace triax::mamba
