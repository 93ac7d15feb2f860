// The product of a channel-major input and a linear layer's matrix (triax/layers/channel_major_linear.hpp)
// as a custom autograd function, so that the input's gradient comes out channel-major too.
#include "triax/layers/channel_major_linear.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "deferred_weight.hpp"

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The same matrix for each of `batch` rows, without a copy (a zero batch stride).
at::Tensor shared_over_batch(const at::Tensor& matrix, int64_t batch) {
  return matrix.unsqueeze(0).expand({batch, matrix.size(0), matrix.size(1)});
}

// sum_i grad[i]ᵀ x[i]ᵀ: grad [b, s, out], x [b, in, s] -> [out, in] in x's dtype. One product per
// batch row, all in one batched call (a single product over b * s rows would need x copied to
// [b * s, in]); reduced dtypes sum the rows' products in fp32 and round once, as one product would.
at::Tensor summed_weight_gradient(const at::Tensor& grad, const at::Tensor& x) {
  const at::Tensor per_row_grad = grad.transpose(1, 2), per_row_input = x.transpose(1, 2);  // [b, out, s], [b, s, in]
  if (x.size(0) == 1) return per_row_grad[0].mm(per_row_input[0]);
  const c10::ScalarType type = x.scalar_type();
  if (type == at::kFloat || type == at::kDouble) return at::bmm(per_row_grad, per_row_input).sum(0);
  const at::Tensor per_row = x.is_cuda() ? at::bmm(per_row_grad, per_row_input, at::kFloat)
                                         : at::bmm(per_row_grad.to(at::kFloat), per_row_input.to(at::kFloat));
  return per_row.sum(0).to(type);
}

// y = xᵀ matrixᵀ per batch row; with a deferral (weight active) the matrix arrives detached and
// its gradient goes to the queue.
struct ChannelMajorLinearFunction : torch::autograd::Function<ChannelMajorLinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& matrix,
                            const detail::DeferredWeight& weight) {
    weight.save(ctx);
    ctx->save_for_backward({x, matrix});
    return at::bmm(x.transpose(1, 2), shared_over_batch(matrix.t(), x.size(0)));  // [b, s, out]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &matrix = saved[1], grad = grads[0];
    at::Tensor grad_input, grad_matrix;
    // [b, in, out] x [b, out, s]: written [b, in, s], the input's own layout.
    if (ctx->needs_input_grad(0)) grad_input = at::bmm(shared_over_batch(matrix.t(), x.size(0)), grad.transpose(1, 2));
    const detail::DeferredWeight weight = detail::DeferredWeight::saved(ctx);
    if (weight.active())
      weight.defer([grad, x] { return summed_weight_gradient(grad, x); });
    else if (ctx->needs_input_grad(1))
      grad_matrix = summed_weight_gradient(grad, x);
    return {grad_input, grad_matrix, at::Tensor()};
  }
};

}  // namespace

at::Tensor channel_major_linear(const at::Tensor& x, const at::Tensor& matrix) {
  const detail::DeferredWeight weight = detail::DeferredWeight::of(x, matrix);
  return ChannelMajorLinearFunction::apply(x, weight.operand(), weight);
}

}  // namespace triax
