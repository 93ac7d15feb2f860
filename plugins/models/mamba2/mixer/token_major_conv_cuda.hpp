// The CUDA side of token_major_conv.hpp (token_major_conv_cuda.cpp, built with -DTRIAX_CUDA=ON):
// the autograd function over the token-major conv1d kernels and when it applies.
#pragma once

#include <ATen/core/Tensor.h>

#include "in_proj_gradient.hpp"

namespace triax::mamba2 {

// TRIAX_MAMBA2_TOKEN_MAJOR_CONV: on unless "0". Read at every call, so that one process can time
// both paths.
bool token_major_conv_switched_on();

// Switched on, the fused kernels enabled, x [b, s, groups, group_conv] on CUDA in a kernel dtype with
// unit channel stride, weight and bias on its device, at most 8 taps.
bool token_major_conv_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The conv + SiLU, differentiable in x, weight and bias: [b, s, groups group_conv] contiguous in
// x's dtype. With x_gradient (x a view of in_proj's output), x's gradient is written into its slot.
at::Tensor token_major_conv_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                 const c10::intrusive_ptr<InProjGradient>& x_gradient = {});

}  // namespace triax::mamba2
