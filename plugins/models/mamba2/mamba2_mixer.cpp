#include "mamba2_mixer.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "selective_scan.hpp"
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

at::Tensor Mamba2Mixer::forward(const at::Tensor& hidden) {
  const int64_t b = hidden.size(0), s = hidden.size(1);
  const int64_t d = config_.d_inner(), heads = config_.num_heads, groups = config_.n_groups;
  const int64_t n = config_.state_size;
  const at::Tensor projected = in_proj->forward(hidden);  // [b, s, d + conv_dim + heads]
  const at::Tensor z = projected.narrow(2, 0, d);
  const at::Tensor xbc_in = projected.narrow(2, d, config_.conv_dim()).transpose(1, 2).contiguous();
  const at::Tensor xbc = mamba::causal_conv1d(xbc_in, conv_weight_.squeeze(1), conv_bias_, /*silu=*/true)
                             .transpose(1, 2);  // [b, s, conv_dim]
  const at::Tensor x = xbc.narrow(2, 0, d).reshape({b, s, heads, config_.head_dim});
  SsdInputs inputs;
  inputs.x = x;
  inputs.dt = time_step(projected.narrow(2, d + config_.conv_dim(), heads));
  inputs.A = -at::exp(A_log.to(inputs.dt.scalar_type()));
  inputs.B = xbc.narrow(2, d, groups * n).reshape({b, s, groups, n});
  inputs.C = xbc.narrow(2, d + groups * n, groups * n).reshape({b, s, groups, n});
  const at::Tensor scanned = ssd_chunked(inputs, config_.chunk_size).y;  // fp32 (fp64 for fp64)
  const at::Tensor y = scanned + D.to(scanned.scalar_type()).unsqueeze(-1) * x.to(scanned.scalar_type());
  return out_proj->forward(gated_norm(y.reshape({b, s, d}), z).to(hidden.scalar_type()));
}

}  // namespace triax::mamba2
