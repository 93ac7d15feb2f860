// RMSNorm in front of a layer whose residual stream is kept in fp32 while the layer computes in a
// 16-bit dtype (Mamba's residual_in_fp32), in training: out = residual + f(norm(residual cast to
// the weight's dtype)). Unfused, that costs a cast of the residual (forward), a cast of the norm's
// input gradient back to fp32 and a sum of the residual's two gradients (backward), each a pass
// over the activation.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace triax {

// {residual, rms_norm(residual cast to weight's dtype, weight, eps)} (triax/layers/fused_ops.hpp's
// rms_norm). The first result is residual itself, to be added to the layer's output: the gradient
// that reaches it is the residual stream's own.
// On CUDA (residual fp32, weight fp32, bf16 or fp16, fused kernels on) one autograd function: the
// forward's norm kernel reads the fp32 residual, rounding it as it loads, and writes the rounded
// row it keeps for backward beside the norm (no cast pass; the cast's bytes saved); the backward's
// kernel writes the residual's gradient in fp32, the norm's part rounded to the
// weight's dtype and then plus the residual stream's gradient (no cast pass, no separate sum): the
// bits of the composition's for a 16-bit weight (an fp32 one: the add may fuse with the last
// multiply, one rounding fewer). Everywhere else the composition: the cast, rms_norm, and autograd's
// cast and sum of the gradients.
std::pair<at::Tensor, at::Tensor> rms_norm_of_fp32_residual(const at::Tensor& residual, const at::Tensor& weight,
                                                            double eps);

}  // namespace triax
