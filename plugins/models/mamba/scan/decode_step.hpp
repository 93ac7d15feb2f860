// A Mamba layer's decoding step at one new token per row (the mixer's cached forward when a step
// is one token on CUDA): the conv and the SSM halves, each continuing the rows' states and writing
// them in place. CUDA operands of one dtype (fp32, bf16, fp16; the SSM state fp32) run the fused
// kernels of conv_state_step.cu and ssm_state_step.cu; all others (the CPU, fp64,
// TRIAX_FUSED_KERNELS=0) the composition of causal_conv1d and selective_scan_with_state over a
// sequence of one, which the kernels' tests take as the reference.
#pragma once

#include <ATen/core/Tensor.h>

namespace triax::mamba {

// x [rows, d] (rows may be strided, as halves of in_proj's output), conv_state [rows, d, k - 1]
// (each channel's last inputs, oldest first), weight [d, k], bias [d] or undefined. Returns u =
// SiLU(conv) [rows, d]; conv_state then holds the last k - 1 inputs, x the newest.
at::Tensor conv_state_step(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                           const at::Tensor& bias);

struct SsmStepArgs {
  at::Tensor u, delta;          // [rows, d]; delta before its bias
  at::Tensor A_log;             // [d, n]: A = -exp(A_log)
  at::Tensor B, C;              // [rows, n] (rows may be strided, as parts of x_proj's output)
  at::Tensor D, z, delta_bias;  // [d], [rows, d] (rows may be strided), [d]; each may be undefined
  // dt_proj folded into the step (delta undefined): delta = dt @ dt_proj_weight^T in u's dtype,
  // computed by the step's kernel, so that dt_proj needs no launch of its own. dt [rows, r] (rows
  // may be strided: x_proj's output), dt_proj_weight [d, r].
  at::Tensor dt, dt_proj_weight;
};

// dt = softplus(delta + delta_bias); h = exp(dt A) h + dt B u; y = (C . h + D u) SiLU(z).
// Returns y [rows, d] in u's dtype; state [rows, d, n] fp32 holds h afterwards.
at::Tensor ssm_state_step(const SsmStepArgs& args, const at::Tensor& state);

}  // namespace triax::mamba
