#include "mamba2_mixer.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gated_norm.hpp"
#include "selective_scan.hpp"
#include "ssm_backbone.hpp"
#include "ssd.hpp"
#include "token_major_conv.hpp"

namespace triax::mamba2 {

void Mamba2Mixer::check_tensor_parallel(ConfigReader& reader, const Mamba2MixerConfig& config,
                                        const ModelContext& context) {
  if (config.n_groups % context.tp_size != 0)
    reader.fail("n_groups", std::to_string(config.n_groups) +
                                " groups are not divisible by the tensor parallel size " +
                                std::to_string(context.tp_size) + " (a rank would hold part of a group of heads)");
}

Mamba2Mixer::Mamba2Mixer(const Mamba2MixerConfig& config, const ModelContext& context)
    : ChannelShards(context.device, context.dtype, TensorParallel::of(context)),
      config_(config),
      local_groups_(config.n_groups / std::max<int64_t>(context.tp_size, 1)),
      local_heads_(local_groups_ * config.heads_per_group()) {
  const int64_t h = config.hidden_size, d = config.d_inner(), heads = config.num_heads, groups = config.n_groups;
  auto shards = [&] { return std::make_shared<mamba::ChannelShards>(context.device, context.dtype, tp()); };
  // Registration order: Hugging Face's parameter order (the mixer's own, then its modules').
  dt_bias = add("dt_bias", {heads}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  A_log = add("A_log", {heads}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  D = add("D", {heads}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  conv1d = register_module("conv1d", shards());
  conv_weight_ = conv1d->add("weight", {groups, config.group_conv_dim(), 1, config.conv_kernel}, 0);
  if (config.use_conv_bias) conv_bias_ = conv1d->add("bias", {groups, config.group_conv_dim()}, 0);
  LinearOptions projection = LinearOptions::of(h, config.group_projection_size(), context, config.use_bias);
  projection.groups = groups;
  projection.widest_part = std::max(config.group_channels(), config.state_size);
  in_proj = register_module("in_proj", std::make_shared<ColumnParallelLinear>(projection, tp()));
  norm = register_module("norm", shards());
  norm_weight_ = norm->add("weight", {d}, 0);
  out_proj = register_module("out_proj", std::make_shared<RowParallelLinear>(
                                             LinearOptions::of(d, h, context, config.use_bias), tp()));
}

at::Tensor Mamba2Mixer::time_step(const at::Tensor& dt) const {
  const c10::ScalarType type = at::promote_types(dt.scalar_type(), at::kFloat);
  at::Tensor step = at::softplus(dt.to(type) + dt_bias.to(type));
  if (config_.time_step_limit_low > 0.0 || std::isfinite(config_.time_step_limit_high))
    step = step.clamp(config_.time_step_limit_low, config_.time_step_limit_high);
  return step;
}

at::Tensor Mamba2Mixer::conv_weight() const { return conv_weight_.reshape({-1, config_.conv_kernel}); }

at::Tensor Mamba2Mixer::conv_bias() const { return conv_bias_.defined() ? conv_bias_.reshape({-1}) : at::Tensor(); }

Mamba2Mixer::Projected Mamba2Mixer::split(const at::Tensor& in_proj_output) const {
  const int64_t b = in_proj_output.size(0), s = in_proj_output.size(1), g = config_.group_channels();
  const int64_t conv = config_.group_conv_dim(), r = config_.heads_per_group();
  const at::Tensor projected = in_proj_output.reshape({b, s, local_groups_, -1});  // [b, s, groups/tp, z|x, B, C|dt]
  // One split instead of three narrows: the backward joins the three gradients in one tensor (the
  // gated norm's and the convolution's kernels write theirs in place, in_proj_gradient.hpp; else
  // one cat), where each narrow's would be a zero tensor of the whole output with its part copied
  // in, then summed.
  const c10::intrusive_ptr<InProjGradient> gradient = in_proj_gradient_for(projected);
  const std::vector<at::Tensor> parts = split_in_proj_output(projected, {g, conv, r}, gradient);
  return {parts[0].reshape({b, s, local_groups_ * g}), parts[1], parts[2].reshape({b, s, local_heads_}), gradient};
}

std::pair<at::Tensor, at::Tensor> Mamba2Mixer::mix(const Projected& projected, const at::Tensor& convolved,
                                                   const at::Tensor& initial_state, c10::ScalarType dtype) {
  const int64_t b = convolved.size(0), s = convolved.size(1);
  const int64_t n = config_.state_size;
  const at::Tensor grouped = convolved.reshape({b, s, local_groups_, config_.group_conv_dim()});  // x, B, C per group
  const at::Tensor dt = time_step(projected.dt);
  const at::Tensor A = -at::exp(A_log.to(dt.scalar_type()));
  at::Tensor x;
  SsdOutputs scanned;                   // y fp32 (fp64), or x's type (ssd.hpp)
  if (packed_gradient_switched_on()) {  // dx, dB and dC written into one gradient of `grouped`
    const PackedSsdOutputs packed = ssd_chunked_packed({grouped, dt, A, initial_state, n}, config_.chunk_size);
    x = packed.x;
    scanned = {packed.y, packed.final_state};
  } else {  // views of `grouped`: their gradients joined by one cat
    const SsdInputs inputs = ssd_inputs_of({grouped, dt, A, initial_state, n});
    x = inputs.x;
    scanned = ssd_chunked(inputs, config_.chunk_size);
  }
  const GatedNormArgs gate{scanned.y, x, projected.z, D, norm_weight_, local_groups_, config_.layer_norm_epsilon};
  return {gated_rms_norm_landing_z(gate, dtype, projected.gradient), scanned.final_state};
}

at::Tensor Mamba2Mixer::forward(const at::Tensor& hidden) {
  const Projected projected = split(in_proj->forward(hidden));  // the whole sequence
  const at::Tensor convolved =
      token_major_causal_conv1d(projected.conv_input, conv_weight(), conv_bias(), projected.gradient);
  return out_proj->forward(mix(projected, convolved, at::Tensor(), hidden.scalar_type()).first);
}

at::Tensor Mamba2Mixer::forward_cached(const at::Tensor& hidden, const CachedStep& step) {
  const std::vector<Mamba2LayerCache*> rows = mamba::caches_of<Mamba2LayerCache>(step, "mamba2");
  const at::Tensor whole = in_proj->forward(hidden);  // [rows, padded, ...], the whole sequence
  const int64_t padded = whole.size(1), keep = step.keep, taps = config_.conv_kernel;
  const int64_t channels = local_groups_ * config_.group_conv_dim();
  const Projected projected = split(whole.narrow(1, 0, keep));
  // The convolution continues each row's last conv_kernel - 1 inputs (zeros before the first token).
  std::vector<at::Tensor> previous, states;
  for (Mamba2LayerCache* cache : rows) {
    previous.push_back(cache->conv_state.defined() ? cache->conv_state
                                                   : at::zeros({channels, taps - 1}, hidden.options()));
    states.push_back(cache->ssm_state.defined()
                         ? cache->ssm_state
                         : at::zeros({local_heads_, config_.head_dim, config_.state_size},
                                     hidden.options().dtype(at::kFloat)));
  }
  // [rows, conv_dim/tp, taps - 1 + keep]
  const at::Tensor extended = at::cat({at::stack(previous), channel_major(projected.conv_input)}, 2);
  const at::Tensor convolved = mamba::causal_conv1d(extended, conv_weight(), conv_bias(), true)
                                   .narrow(2, taps - 1, keep)
                                   .transpose(1, 2);
  auto [mixed, state] = mix(projected, convolved, at::stack(states), hidden.scalar_type());
  const at::Tensor last_inputs = extended.narrow(2, keep, taps - 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i]->conv_state = last_inputs[static_cast<int64_t>(i)].clone();
    rows[i]->ssm_state = state[static_cast<int64_t>(i)].to(at::kFloat).clone();
  }
  if (padded > keep)
    mixed = at::cat({mixed, at::zeros({mixed.size(0), padded - keep, mixed.size(2)}, mixed.options())}, 1);
  return out_proj->forward(mixed);
}

}  // namespace triax::mamba2
