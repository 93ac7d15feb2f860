// Mamba-1's selective state-space scan and causal depthwise conv1d, each differentiable.
//
// Shapes: batch b, channels d (d_inner or its tensor-parallel shard), length l, state n.
// u, delta, z: [b, d, l] contiguous; B, C: [b, n, l]; A: [d, n] fp32 (the caller passes
// A = -exp(A_log)); D and delta_bias: [d] fp32.
//
// CUDA inputs of fp32 or bf16 (n <= 32) run the fused kernels of this folder's .cu files when
// built with -DTRIAX_CUDA=ON: the sequence is walked in chunks with the state in registers, so no
// [b, d, l, n] tensor is ever written to global memory. Everything else runs the LibTorch
// reference (reference_scan.hpp): a loop over the sequence with the state in fp32 (fp64 for fp64
// inputs). TRIAX_FUSED_KERNELS=0 in the environment sends CUDA inputs to the reference too.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace triax::mamba {

struct SelectiveScanArgs {
  at::Tensor u, delta, A, B, C, D;  // D may be undefined (no skip)
  at::Tensor z;                     // optional gate: y *= silu(z)
  at::Tensor delta_bias;            // optional: delta + delta_bias before softplus
  bool delta_softplus = true;
};

// y [b, d, l] in u's dtype:  dt = softplus(delta + delta_bias);  h_t = exp(dt_t*A) h_{t-1} + dt_t*B_t*u_t;
// y_t = C_t . h_t + D*u_t;  y *= silu(z).  State and accumulation in fp32. Differentiable with
// respect to every tensor input (a torch::autograd::Function); CUDA inputs use the fused kernels,
// all others the LibTorch reference.
at::Tensor selective_scan(const SelectiveScanArgs& args);

// Inference (no autograd): starts from initial_state [b, d, n] fp32 (undefined = zeros); returns
// y and the state after the last position (for the generation cache).
std::pair<at::Tensor, at::Tensor> selective_scan_with_state(const SelectiveScanArgs& args,
                                                            const at::Tensor& initial_state);

// Causal depthwise conv1d: x [b, d, l], weight [d, k], bias [d] or undefined;
// y[:, c, t] = bias[c] + sum_j weight[c, j] * x[:, c, t - (k-1) + j] (zero left padding), then SiLU if silu.
// Differentiable; CUDA inputs use the fused kernel.
at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu);

}  // namespace triax::mamba
