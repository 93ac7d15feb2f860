// The Mamba-2 mixer of one layer, as Hugging Face's Mamba2Mixer computes it:
//   (z, xBC, dt) = in_proj(h);  (x, B, C) = SiLU(conv1d(xBC)) (causal, depthwise, conv_kernel taps);
//   dt = clamp(softplus(dt + dt_bias), time_step_limit);  A = -exp(A_log) (one scalar per head);
//   y = SSD(x, dt, A, B, C) + D x (ssd.hpp, chunk_size positions per chunk; B and C per group);
//   y = norm(y * SiLU(z)) (an RMSNorm over each group's channels, then norm.weight);
//   out = out_proj(y).
// Tensor parallel by groups of heads, as Megatron shards it: each rank holds n_groups / tp whole
// groups, so in_proj is column-parallel (its groups' z, x, B, C and dt rows), the convolution,
// dt_bias, A_log, D and the gated norm (per group) are split with them, and out_proj is
// row-parallel; the scan runs on each rank's heads over the whole sequence, in either tp_mode.
// Parameters (Hugging Face's names; H heads of P channels, G groups of R = H / G heads, state N,
// d = H P, g = R P a group's channels):
//   dt_bias [H]  A_log [H]  D [H]  conv1d.weight [G, g + 2 N, 1, conv_kernel] (x, B, C of each
//   group)  conv1d.bias [G, g + 2 N] (use_conv_bias)  in_proj.weight [G, 2 g + 2 N + R, hidden]
//   (.bias [G, 2 g + 2 N + R] with use_bias; rows z, x, B, C, dt of each group)  norm.weight [d]
//   out_proj.weight [hidden, d] (.bias with use_bias)
// in_proj and conv1d are grouped so that a rank's share is one block of each; Hugging Face's
// tensors hold the same rows part by part (z of every head, then x, ...): the tensor map
// interleaves them (hf_mapping.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <utility>

#include "channel_shards.hpp"
#include "in_proj_gradient.hpp"
#include "mamba2_mixer_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/config_reader.hpp"
#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax::mamba2 {

// What one sequence keeps of one layer between cached forwards: the last conv_kernel - 1 inputs of
// the convolution (x, B and C) and the scan's state.
struct Mamba2LayerCache : LayerCache {
  // This rank's groups: conv_dim / tp channels (grouped as conv1d.weight), num_heads / tp heads.
  at::Tensor conv_state;  // [conv_dim / tp, conv_kernel - 1], the activations' dtype; undefined: zeros
  at::Tensor ssm_state;   // [num_heads / tp, head_dim, state_size] fp32; undefined: zeros
};

class Mamba2Mixer : public mamba::ChannelShards {
 public:
  Mamba2Mixer(const Mamba2MixerConfig& config, const ModelContext& context);

  // Refuses groups of heads not divisible by tp (tensor parallelism splits whole groups): a
  // ConfigError naming n_groups of `reader`.
  static void check_tensor_parallel(ConfigReader& reader, const Mamba2MixerConfig& config, const ModelContext& context);

  // hidden: the normed activations between blocks, [b, s, hidden_size] ([b, s/tp, hidden_size] in
  // REDUCE_SCATTER mode) -> the same shape.
  at::Tensor forward(const at::Tensor& hidden);
  // Inference: the new tokens of each row of `step` continue the row's Mamba2LayerCache; the first
  // step.keep of them enter it (the rest is padding, whose outputs are out_proj of zeros).
  at::Tensor forward_cached(const at::Tensor& hidden, const CachedStep& step);

  std::shared_ptr<mamba::ChannelShards> conv1d, norm;
  std::shared_ptr<ColumnParallelLinear> in_proj;
  std::shared_ptr<RowParallelLinear> out_proj;
  at::Tensor dt_bias, A_log, D;

 private:
  // in_proj's output over the whole sequence, this rank's groups, split: z [b, s, d/tp], the
  // convolution's input [b, s, groups/tp, group_conv_dim] (a view, token-major), dt [b, s, H/tp];
  // `gradient`, where the parts' gradients land in one tensor (in_proj_gradient.hpp), else null.
  struct Projected {
    at::Tensor z, conv_input, dt;
    c10::intrusive_ptr<InProjGradient> gradient;
  };
  Projected split(const at::Tensor& in_proj_output) const;
  // The depthwise convolution's taps [conv_dim/tp, conv_kernel] and bias (undefined without).
  at::Tensor conv_weight() const;
  at::Tensor conv_bias() const;
  // From the convolution's output [b, s, conv_dim/tp] (token_major_conv.hpp): out_proj's input [b, s, d/tp] in `dtype` and the
  // scan's final state, starting from `initial_state` (undefined: zeros).
  std::pair<at::Tensor, at::Tensor> mix(const Projected& projected, const at::Tensor& convolved,
                                        const at::Tensor& initial_state, c10::ScalarType dtype);
  // The scan's step per position and head: softplus(dt + dt_bias), clamped to time_step_limit.
  at::Tensor time_step(const at::Tensor& dt) const;

  Mamba2MixerConfig config_;
  int64_t local_groups_, local_heads_;
  at::Tensor conv_weight_, conv_bias_, norm_weight_;
};

}  // namespace triax::mamba2
