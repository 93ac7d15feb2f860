// The mixer's D skip, gate and group RMSNorm in one step:
//   out = rmsnorm_per_group((y + D x) silu(z)) weight,
// in the mixer's order: the skip y + D x, the gate, then each group's RMS and norm.weight.
// On CUDA one autograd function runs fused kernels (gated_norm_kernels.hpp) that keep only
// their inputs and the per-row rstd; elsewhere (and with TRIAX_MAMBA2_FUSED_NORM=0) the LibTorch
// composition, the reference, runs. The autograd function also runs on CPU with LibTorch
// formulas, so that its backward is checked there against autograd through the composition.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "in_proj_gradient.hpp"

namespace triax::mamba2 {

struct GatedNormArgs {
  at::Tensor y;       // [b, l, H, P], the SSD's output (fp32, or the activations' type)
  at::Tensor x;       // [b, l, H, P], the SSD's input
  at::Tensor z;       // [b, l, H P], the gate
  at::Tensor D;       // [H]
  at::Tensor weight;  // [H P], norm.weight
  int64_t groups;     // the norm's groups (whole heads each)
  double eps;
};

// [b, l, H P] in `dtype`: the fused kernels for CUDA tensors they take, else the composition.
at::Tensor gated_rms_norm(const GatedNormArgs& args, c10::ScalarType dtype);
// gated_rms_norm with z a view of in_proj's output: where the third backward runs, z's gradient is
// written into its slot of `z_gradient` (in_proj_gradient.hpp; null: as gated_rms_norm), the same bits.
at::Tensor gated_rms_norm_landing_z(const GatedNormArgs& args, c10::ScalarType dtype,
                                    const c10::intrusive_ptr<InProjGradient>& z_gradient);

// The LibTorch composition (autograd through every op), in y's type promoted to fp32 at least.
at::Tensor gated_rms_norm_composed(const GatedNormArgs& args, c10::ScalarType dtype);

// The autograd function: the kernels on CUDA (gated_norm_kernels_apply), LibTorch formulas on CPU.
at::Tensor gated_rms_norm_function(const GatedNormArgs& args, c10::ScalarType dtype);

// Whether the CUDA kernels take these operands (always false in a CPU build).
bool gated_norm_kernels_apply(const GatedNormArgs& args, c10::ScalarType dtype);

// Which kernels gated_rms_norm runs for these operands: "v1", "v2" or "v3" (the CUDA kernels; v2
// where a group's row fits its registers, unless TRIAX_MAMBA2_GATED_NORM_KERNEL=v1; v3, v2's forward
// and the third backward, only with TRIAX_MAMBA2_GATED_NORM_KERNEL=v3 where it fits), else "composition".
const char* gated_norm_kernels_used(const GatedNormArgs& args, c10::ScalarType dtype);

}  // namespace triax::mamba2
