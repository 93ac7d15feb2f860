// Mamba's in_proj from the token-major normed activations to the channel-major x and z the
// convolution and the scan read, as one autograd function: its backward writes the input's
// gradient token-major ([b, s, h], as the norm's backward reads it, so no transposing copy) and
// sums the two halves' contributions inside the second product instead of a separate add.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace triax::mamba {

// input [b, s, h], weight [2, d, h] (the x rows, then the z rows) -> x and z, each [b, d, s]
// contiguous: x[i] = weight[0] @ input[i]ᵀ, z[i] = weight[1] @ input[i]ᵀ.
std::pair<at::Tensor, at::Tensor> in_projection(const at::Tensor& input, const at::Tensor& weight);

}  // namespace triax::mamba
