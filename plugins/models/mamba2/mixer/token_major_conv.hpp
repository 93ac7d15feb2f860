// The mixer's causal depthwise conv1d + SiLU over x, B and C, taken token-major: its input is
// in_proj's output split per group, [b, s, groups, group_conv] (unit channel stride, any other
// strides), its output [b, s, groups group_conv] contiguous, the layout the scan and the gated
// norm read. On CUDA, with TRIAX_MAMBA2_TOKEN_MAJOR_CONV switched on (token_major_conv_cuda.hpp),
// one autograd function over the kernels of token_major_conv_kernels.hpp: no transposing copy of
// the input, the output or their gradients. Elsewhere Mamba-1's channel-major causal_conv1d
// between two layout changes (the reference; the same values as before the switch).
#pragma once

#include <ATen/core/Tensor.h>

#include "in_proj_gradient.hpp"

namespace triax::mamba2 {

// [b, s, groups, group_conv] -> [b, groups group_conv, s] contiguous (one copy).
at::Tensor channel_major(const at::Tensor& token_major);

// weight [groups group_conv, k], bias [groups group_conv] or undefined. x_gradient (x a view of
// in_proj's output): where the CUDA kernels run, x's gradient lands in its slot of in_proj's.
at::Tensor token_major_causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                     const c10::intrusive_ptr<InProjGradient>& x_gradient = {});

}  // namespace triax::mamba2
