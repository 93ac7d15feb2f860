#include "channel_major_products.hpp"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include "triax/layers/tensor_parallel_ops.hpp"

namespace triax::mamba {

at::Tensor shared_over_batch(const at::Tensor& matrix, int64_t batch) {
  return matrix.unsqueeze(0).expand({batch, matrix.size(0), matrix.size(1)});
}

at::Tensor channel_major_product(const at::Tensor& weight, const at::Tensor& x) {
  return at::bmm(shared_over_batch(weight, x.size(0)), x);
}

ProductGradients channel_major_product_backward(const at::Tensor& weight, const at::Tensor& x,
                                                const at::Tensor& grad_out) {
  const at::Tensor shared = shared_over_batch(weight, x.size(0));
  // bmm's backward, then the expansion's (a sum over the batch) and the unsqueeze's.
  const at::Tensor per_row = at::bmm(grad_out, x.transpose(1, 2));
  const int64_t summed_shape[] = {1, weight.size(0), weight.size(1)};
  return {at::sum_to(per_row, summed_shape).squeeze(0), at::bmm(shared.transpose(1, 2), grad_out)};
}

at::Tensor sum_over_channels(const at::Tensor& partial, const TensorParallel& tp) {
  if (tp.size == 1) return partial;
  return identity_forward_all_reduce_backward(all_reduce_forward_identity_backward(partial, tp), tp);
}

at::Tensor sum_over_channels_backward(const at::Tensor& grad, const TensorParallel& tp) {
  at::NoGradGuard no_grad;  // the all-reduce alone, as identity_forward_all_reduce_backward's backward runs it
  return all_reduce_forward_identity_backward(grad, tp);
}

}  // namespace triax::mamba
