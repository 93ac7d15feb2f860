// The Mamba-1 mixer of one layer, as Hugging Face's MambaMixer computes it:
//   (x, z) = in_proj(h); u = SiLU(conv1d(x)) (causal, depthwise, d_conv taps);
//   (dt, B, C) = x_proj(u); delta = dt_proj.weight @ dt;
//   y = selective_scan(u, delta + dt_proj.bias -> softplus, A = -exp(A_log), B, C, D) * SiLU(z);
//   out = out_proj(y).
// Tensor parallel over the channels (d_inner): in_proj is column-parallel (each rank holds the x
// and the z rows of its channels), conv1d, dt_proj, A_log and D are split with the channels,
// x_proj's output is summed over the group (it mixes every channel, and every channel reads it),
// out_proj is row-parallel. The scan then runs on each rank's channels over the whole sequence, in
// either tp_mode.
//
// Parameters (Hugging Face's names and shapes, but in_proj.weight [2, d_inner, d_model] whose
// Hugging Face tensor is [2 * d_inner, d_model], the x rows then the z rows):
//   in_proj.weight (.bias [2, d_inner] with ssm_cfg.bias)  conv1d.weight [d_inner, 1, d_conv]
//   conv1d.bias [d_inner]  x_proj.weight [dt_rank + 2 d_state, d_inner]  dt_proj.weight
//   [d_inner, dt_rank]  dt_proj.bias [d_inner]  A_log [d_inner, d_state]  D [d_inner]
//   out_proj.weight [d_model, d_inner] (.bias [d_model] with ssm_cfg.bias)
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <utility>

#include "channel_shards.hpp"
#include "mamba_config.hpp"
#include "mamba_inner.hpp"
#include "mamba_layer_cache.hpp"
#include "selective_scan.hpp"
#include "triax/causal_lm.hpp"
#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax::mamba {

class MambaMixer : public ChannelShards {
 public:
  MambaMixer(const MambaConfig& config, const ModelContext& context);

  // hidden: the normed activations between blocks, [b, s, d_model] ([b, s/tp, d_model] in
  // REDUCE_SCATTER mode) -> the same shape.
  at::Tensor forward(const at::Tensor& hidden);
  // Inference: the new tokens of each row of `step` continue the row's MambaLayerCache; the first
  // step.keep of them enter it (the rest is sequence-parallel padding, whose outputs are zeros).
  // One new token per row on CUDA runs the decoding step (scan/decode_step.hpp), which
  // synchronises nothing with the host and writes the states in place.
  at::Tensor forward_cached(const at::Tensor& hidden, const CachedStep& step);

  std::shared_ptr<ChannelShards> in_proj, conv1d, x_proj, dt_proj;
  std::shared_ptr<RowParallelLinear> out_proj;
  at::Tensor A_log, D;

 private:
  // [b, s, d_model] (the whole sequence) -> x and z, each [b, d_inner / tp, s] contiguous.
  std::pair<at::Tensor, at::Tensor> project_in(const at::Tensor& gathered);
  // The parameters between in_proj and out_proj as the conv and the scan read them.
  MambaInnerWeights inner_weights() const;
  // The scan's arguments from the convolution's output u [b, d_inner / tp, s] and the gate z.
  SelectiveScanArgs scan_args(const at::Tensor& u, const at::Tensor& z, const MambaInnerWeights& weights);
  // Training's part between in_proj and out_proj: u = SiLU(conv1d(x)), the projections, the scan
  // gated by z -> y [b, d_inner / tp, s], as differentiable ops.
  at::Tensor conv_and_scan(const at::Tensor& x, const at::Tensor& z);
  // One new token per row, [rows, 1, h] -> y [rows, 1, d/tp] (before out_proj), the states
  // continued in place: the projections as products of one row each, the conv and the scan as
  // one step each (dt_proj inside the scan's step unless TRIAX_MAMBA_DT_IN_STEP=0).
  at::Tensor decode_step(const at::Tensor& gathered, MambaStates& states);
  // The tokens of step.keep [rows, keep, h] through the sequence's conv and scan from the states,
  // which then hold those after the last token -> y [rows, d/tp, keep].
  at::Tensor sequence_step(const at::Tensor& gathered, MambaStates& states);

  MambaConfig config_;
  // TRIAX_MAMBA_DT_IN_STEP (default on; read at construction): the decoding step's dt_proj product
  // computed by the SSM step's kernel (SsmStepArgs::dt_proj_weight), not by a GEMV of its own.
  bool fold_dt_in_step_;
  // ssm_cfg.recompute_conv (default false; TRIAX_MAMBA_RECOMPUTE_CONV=0 or 1, read at construction,
  // overrides it for timings): training's part between
  // in_proj and out_proj runs as mamba_inner() (mamba_inner.hpp), which keeps x, z, x_proj's
  // output and the scan's checkpoints but neither u nor delta (at Mamba-1.4b, mbs 4 x 2048, 128 MiB
  // of a layer's 451: docs/mamba-performance.md), for a second conv forward and dt_proj product
  // per layer in the backward (not a second scan), as mamba-ssm's mamba_inner_fn does by default. The
  // same gradients bit for bit on the CPU; at 1.4b on one H100 the peak 40.12 -> 34.09 GiB for 2.7% of
  // the step's speed: a memory option, off so that no step slows by default (configs/bench/mamba-1.4b.yaml
  // turns it on).
  bool recompute_conv_;
  at::Tensor in_proj_weight_, in_proj_bias_, conv_weight_, conv_bias_, x_proj_weight_, dt_proj_weight_, dt_proj_bias_;
};

}  // namespace triax::mamba
