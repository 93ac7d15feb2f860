#include "mamba2_mixer.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "selective_scan.hpp"
#include "ssm_backbone.hpp"
#include "ssd.hpp"

namespace triax::mamba2 {

Mamba2Mixer::Mamba2Mixer(const Mamba2Config& config, const ModelContext& context)
    : ChannelShards(context.device, context.dtype, TensorParallel::of(context)), config_(config) {
  const int64_t h = config.hidden_size, d = config.d_inner(), heads = config.num_heads;
  auto shards = [&] { return std::make_shared<mamba::ChannelShards>(context.device, context.dtype, tp()); };
  // Registration order: Hugging Face's parameter order (the mixer's own, then its modules').
  dt_bias = add("dt_bias", {heads}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  A_log = add("A_log", {heads}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  D = add("D", {heads}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  conv1d = register_module("conv1d", shards());
  conv_weight_ = conv1d->add("weight", {config.conv_dim(), 1, config.conv_kernel}, 0);
  if (config.use_conv_bias) conv_bias_ = conv1d->add("bias", {config.conv_dim()}, 0);
  in_proj = register_module("in_proj", std::make_shared<ColumnParallelLinear>(
                                           LinearOptions::of(h, config.projection_size(), context, config.use_bias),
                                           tp()));
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

at::Tensor Mamba2Mixer::gated_norm(const at::Tensor& y, const at::Tensor& z) const {
  const std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end());
  std::vector<int64_t> grouped(shape.begin(), shape.end() - 1);
  grouped.push_back(config_.n_groups);
  grouped.push_back(-1);
  const at::Tensor gated = (y * at::silu(z.to(y.scalar_type()))).reshape(grouped);
  const at::Tensor normed = gated * at::rsqrt(gated.pow(2).mean(-1, true) + config_.layer_norm_epsilon);
  return normed.reshape(shape) * norm_weight_.to(y.scalar_type());
}

Mamba2Mixer::Projected Mamba2Mixer::project(const at::Tensor& hidden) {
  const int64_t d = config_.d_inner();
  const at::Tensor projected = in_proj->forward(hidden);  // [b, s, d + conv_dim + heads]
  return {projected.narrow(2, 0, d), projected.narrow(2, d, config_.conv_dim()).transpose(1, 2).contiguous(),
          projected.narrow(2, d + config_.conv_dim(), config_.num_heads)};
}

std::pair<at::Tensor, at::Tensor> Mamba2Mixer::mix(const Projected& projected, const at::Tensor& convolved,
                                                   const at::Tensor& initial_state, c10::ScalarType dtype) {
  const int64_t b = convolved.size(0), s = convolved.size(1);
  const int64_t d = config_.d_inner(), groups = config_.n_groups, n = config_.state_size;
  const at::Tensor x = convolved.narrow(2, 0, d).reshape({b, s, config_.num_heads, config_.head_dim});
  SsdInputs inputs;
  inputs.x = x;
  inputs.dt = time_step(projected.dt);
  inputs.A = -at::exp(A_log.to(inputs.dt.scalar_type()));
  inputs.B = convolved.narrow(2, d, groups * n).reshape({b, s, groups, n});
  inputs.C = convolved.narrow(2, d + groups * n, groups * n).reshape({b, s, groups, n});
  inputs.initial_state = initial_state;
  const SsdOutputs scanned = ssd_chunked(inputs, config_.chunk_size);  // fp32 (fp64 for fp64)
  const c10::ScalarType type = scanned.y.scalar_type();
  const at::Tensor y = scanned.y + D.to(type).unsqueeze(-1) * x.to(type);
  return {gated_norm(y.reshape({b, s, d}), projected.z).to(dtype), scanned.final_state};
}

at::Tensor Mamba2Mixer::forward(const at::Tensor& hidden) {
  const Projected projected = project(hidden);
  const at::Tensor convolved = mamba::causal_conv1d(projected.conv_input, conv_weight_.squeeze(1), conv_bias_,
                                                    /*silu=*/true)
                                   .transpose(1, 2);  // [b, s, conv_dim]
  return out_proj->forward(mix(projected, convolved, at::Tensor(), hidden.scalar_type()).first);
}

at::Tensor Mamba2Mixer::forward_cached(const at::Tensor& hidden, const CachedStep& step) {
  const std::vector<Mamba2LayerCache*> rows = mamba::caches_of<Mamba2LayerCache>(step, "mamba2");
  const int64_t padded = hidden.size(1), keep = step.keep, taps = config_.conv_kernel;
  const Projected projected = project(hidden.narrow(1, 0, keep));
  // The convolution continues each row's last conv_kernel - 1 inputs (zeros before the first token).
  std::vector<at::Tensor> previous, states;
  for (Mamba2LayerCache* cache : rows) {
    previous.push_back(cache->conv_state.defined() ? cache->conv_state
                                                   : at::zeros({config_.conv_dim(), taps - 1}, hidden.options()));
    states.push_back(cache->ssm_state.defined()
                         ? cache->ssm_state
                         : at::zeros({config_.num_heads, config_.head_dim, config_.state_size},
                                     hidden.options().dtype(at::kFloat)));
  }
  const at::Tensor extended = at::cat({at::stack(previous), projected.conv_input}, 2);  // [rows, conv_dim, taps - 1 + keep]
  const at::Tensor convolved = mamba::causal_conv1d(extended, conv_weight_.squeeze(1), conv_bias_, true)
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
