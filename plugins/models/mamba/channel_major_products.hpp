// The Mamba-1 mixer's x_proj and dt_proj products in the channel-major layout the conv and the scan
// read ([b, channels, s]), x_proj's sum over the tensor-parallel group, and their backward passes
// outside autograd (for mamba_inner.hpp's autograd function), formed as autograd forms them.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"

namespace triax::mamba {

// The same matrix for each of `batch` rows, without a copy (a zero batch stride).
at::Tensor shared_over_batch(const at::Tensor& matrix, int64_t batch);

// weight @ x[i] for each batch row i: [out, in] and [b, in, s] -> [b, out, s], written
// channel-major as the convolution and the scan read it. A single product over [b * s, in] would
// write [b, s, out] and need a transposing copy of each activation both ways (about a quarter of
// a Mamba-130m step on an H100); here the weight is shared by a zero batch stride and a
// transposed input is read in place by the GEMM.
at::Tensor channel_major_product(const at::Tensor& weight, const at::Tensor& x);

// The gradients of sum(grad_out * channel_major_product(weight, x)), by the products and the sum
// over the batch that autograd's backward of the product runs (the same values bit for bit).
struct ProductGradients {
  at::Tensor weight, x;
};
ProductGradients channel_major_product_backward(const at::Tensor& weight, const at::Tensor& x,
                                                const at::Tensor& grad_out);

// x_proj's partial products summed over tp. Every rank's channels then read the sum, so its
// gradient is summed over tp as well: all-reduce both ways.
at::Tensor sum_over_channels(const at::Tensor& partial, const TensorParallel& tp);
// Its backward: the gradient summed over tp (unchanged at tp 1).
at::Tensor sum_over_channels_backward(const at::Tensor& grad, const TensorParallel& tp);

}  // namespace triax::mamba
