// The Mamba-1 mixer's part between in_proj and out_proj (mamba_mixer.hpp):
//   u = SiLU(conv1d(x)); (dt, B, C) = x_proj(u) summed over tp; delta = dt_proj.weight @ dt;
//   y = selective_scan(u, delta, A, B, C, D, z, delta_bias = dt_proj.bias)  [b, d_inner / tp, s].
//
// mamba_inner() is that part as one autograd function (mamba-ssm's mamba_inner_fn at
// checkpoint_lvl 1) that keeps for the backward only x, z, x_proj's output (`projected`,
// [b, dt_rank + 2 d_state, s]), the scan's state checkpoints and the parameters: not u, not delta
// (two [b, d_inner / tp, s] activations). Its backward forms u again (the conv's forward) and delta
// (dt_proj's product), then runs the scan's backward from the checkpoints, dt_proj's and x_proj's
// gradients (with the tp all-reduce of x_proj's output gradient, as sum_over_channels's backward),
// and the conv's backward. The scan's forward is not run again.
//
// The passes are scan_passes.hpp's: the CUDA kernels where they apply; elsewhere the LibTorch
// reference, run again and differentiated by autograd in the backward, so that the CPU runs this
// same function, with the gradients of the differentiable ops bit for bit.
#pragma once

#include <ATen/core/Tensor.h>

#include "selective_scan.hpp"
#include "triax/layers/tensor_parallel.hpp"

namespace triax::mamba {

// The parameters of the part, as it reads them: the scan's in fp32 and A = -exp(A_log), formed
// by the caller under autograd (their gradients leave through those ops).
struct MambaInnerWeights {
  at::Tensor conv_weight;       // [d, d_conv]
  at::Tensor conv_bias;         // [d] or undefined
  at::Tensor x_proj_weight;     // [dt_rank + 2 d_state, d]
  at::Tensor dt_proj_weight;    // [d, dt_rank]
  at::Tensor A, D, delta_bias;  // [d, d_state], [d], [d] fp32
};

// The scan's operands from u [b, d, s], x_proj's output summed over tp `projected` [b, r + 2n, s]
// and the gate z [b, d, s]: delta = dt_proj's product of projected's first r rows (without its
// bias: the scan adds it in fp32), B and C its next n rows each.
SelectiveScanArgs scan_operands(const at::Tensor& u, const at::Tensor& projected, const at::Tensor& z,
                                const MambaInnerWeights& weights);

// x, z: [b, d, s] (in_proj's outputs) -> y [b, d, s] in x's dtype. Differentiable with respect to
// x, z and every tensor of `weights`.
at::Tensor mamba_inner(const at::Tensor& x, const at::Tensor& z, const MambaInnerWeights& weights,
                       const TensorParallel& tp);

}  // namespace triax::mamba
