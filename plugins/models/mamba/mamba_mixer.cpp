#include "mamba_mixer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <vector>

#include "channel_major_products.hpp"
#include "decode_step.hpp"
#include "in_projection.hpp"
#include "mamba_inner.hpp"
#include "ssm_backbone.hpp"
#include "triax/environment_switch.hpp"
#include "triax/error.hpp"
#include "triax/layers/decode_gemv.hpp"

namespace triax::mamba {
namespace {

// x [rows, in] times weight [out, in] transposed, [rows, out]: a decoding step's product, through
// the GEMV kernel at a few rows (decode_gemv.hpp), else one GEMM.
at::Tensor row_product(const at::Tensor& x, const at::Tensor& weight) {
  if (const at::Tensor product = decode_gemv(x, weight); product.defined()) return product;
  return at::mm(x, weight.t());
}

}  // namespace

MambaMixer::MambaMixer(const MambaConfig& config, const ModelContext& context)
    : ChannelShards(context.device, context.dtype, TensorParallel::of(context)),
      config_(config),
      fold_dt_in_step_(switched_on_unless_zero("TRIAX_MAMBA_DT_IN_STEP")),
      recompute_conv_(switch_forced("TRIAX_MAMBA_RECOMPUTE_CONV").value_or(config.ssm.recompute_conv)) {
  const int64_t h = config.d_model, d = config.d_inner(), n = config.ssm.d_state, r = config.dt_rank();
  auto shards = [&] { return std::make_shared<ChannelShards>(context.device, context.dtype, tp()); };
  // Registration order: Hugging Face's parameter order.
  A_log = add("A_log", {d, n}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  D = add("D", {d}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  conv1d = register_module("conv1d", shards());
  conv_weight_ = conv1d->add("weight", {d, 1, config.ssm.d_conv}, 0);
  if (config.ssm.conv_bias) conv_bias_ = conv1d->add("bias", {d}, 0);
  in_proj = register_module("in_proj", shards());
  in_proj_weight_ = in_proj->add("weight", {2, d, h}, 1);
  if (config.ssm.bias) in_proj_bias_ = in_proj->add("bias", {2, d}, 1, TRIAX_PARAM_NO_WEIGHT_DECAY);  // as out_proj.bias
  x_proj = register_module("x_proj", shards());
  x_proj_weight_ = x_proj->add("weight", {r + 2 * n, d}, 1);
  dt_proj = register_module("dt_proj", shards());
  dt_proj_weight_ = dt_proj->add("weight", {d, r}, 0);
  dt_proj_bias_ = dt_proj->add("bias", {d}, 0, TRIAX_PARAM_NO_WEIGHT_DECAY);
  out_proj = register_module("out_proj", std::make_shared<RowParallelLinear>(
                                             LinearOptions::of(d, h, context, config.ssm.bias), tp()));
}

std::pair<at::Tensor, at::Tensor> MambaMixer::project_in(const at::Tensor& gathered) {
  auto [x, z] = in_projection(gathered, in_proj_weight_);  // in_proj.weight: [2, d/tp, h]
  if (!in_proj_bias_.defined()) return {x, z};
  return {x + in_proj_bias_[0].unsqueeze(-1), z + in_proj_bias_[1].unsqueeze(-1)};
}

MambaInnerWeights MambaMixer::inner_weights() const {
  return {conv_weight_.squeeze(1),
          conv_bias_,
          x_proj_weight_,
          dt_proj_weight_,
          -at::exp(A_log.to(at::kFloat)),
          D.to(at::kFloat),
          dt_proj_bias_.to(at::kFloat)};
}

SelectiveScanArgs MambaMixer::scan_args(const at::Tensor& u, const at::Tensor& z, const MambaInnerWeights& weights) {
  return scan_operands(u, sum_over_channels(channel_major_product(weights.x_proj_weight, u), tp()), z, weights);
}

at::Tensor MambaMixer::conv_and_scan(const at::Tensor& x, const at::Tensor& z) {
  const MambaInnerWeights weights = inner_weights();
  const at::Tensor u = causal_conv1d(x, weights.conv_weight, weights.conv_bias, /*silu=*/true);
  return selective_scan(scan_args(u, z, weights));  // [b, d/tp, s] in u's dtype: x's
}

at::Tensor MambaMixer::forward(const at::Tensor& hidden) {
  const at::Tensor gathered = gather_column_parallel_input(hidden, tp());  // [b, s, h]
  auto [x, z] = project_in(gathered);
  // Without a graph to build (inference, or recompute_layer's first pass) nothing would be kept anyway.
  const at::Tensor y =
      recompute_conv_ && at::GradMode::is_enabled() ? mamba_inner(x, z, inner_weights(), tp()) : conv_and_scan(x, z);
  return out_proj->forward_channel_major(y.to(hidden.scalar_type()));  // y in hidden's dtype: no cast runs
}

at::Tensor MambaMixer::forward_cached(const at::Tensor& hidden, const CachedStep& step) {
  const std::vector<MambaLayerCache*> rows = caches_of<MambaLayerCache>(step, "mamba");
  const at::Tensor gathered = gather_column_parallel_input(hidden, tp());  // [rows, padded, h]
  const int64_t padded = gathered.size(1), keep = step.keep, local = in_proj_weight_.size(1);
  MambaStates& states = shared_states(rows, local, config_.ssm.d_conv, config_.ssm.d_state, gathered.options());
  if (keep == 1 && padded == 1 && gathered.is_cuda()) return out_proj->forward(decode_step(gathered, states));

  at::Tensor out = sequence_step(gathered.narrow(1, 0, keep), states).to(hidden.scalar_type());  // [rows, d/tp, keep]
  if (padded > keep) out = at::cat({out, at::zeros({out.size(0), local, padded - keep}, out.options())}, 2);
  return out_proj->forward_channel_major(out);
}

at::Tensor MambaMixer::sequence_step(const at::Tensor& gathered, MambaStates& states) {
  const int64_t keep = gathered.size(1), taps = config_.ssm.d_conv;
  auto [x, z] = project_in(gathered);
  // The convolution continues each row's last d_conv - 1 inputs (zeros before the first token).
  const at::Tensor extended = at::cat({states.conv, x}, 2);  // [rows, d/tp, taps - 1 + keep]
  const MambaInnerWeights weights = inner_weights();
  const at::Tensor u =
      causal_conv1d(extended, weights.conv_weight, weights.conv_bias, true).narrow(2, taps - 1, keep).contiguous();
  const SelectiveScanArgs args = scan_args(u, z, weights);
  auto [y, state] = selective_scan_with_state(args, states.ssm);
  states.conv.copy_(extended.narrow(2, keep, taps - 1));
  states.ssm.copy_(state);
  return y;
}

at::Tensor MambaMixer::decode_step(const at::Tensor& gathered, MambaStates& states) {
  const int64_t rows = gathered.size(0), local = in_proj_weight_.size(1);
  const int64_t r = config_.dt_rank(), n = config_.ssm.d_state;
  // The x rows then the z rows of in_proj, as one product: [rows, 2 d/tp].
  at::Tensor xz = row_product(gathered.reshape({rows, -1}), in_proj_weight_.view({2 * local, -1}));
  if (in_proj_bias_.defined()) xz = xz + in_proj_bias_.view({2 * local});
  const at::Tensor u = conv_state_step(xz.narrow(1, 0, local), states.conv, conv_weight_.squeeze(1), conv_bias_);
  const at::Tensor projected = sum_over_channels(row_product(u, x_proj_weight_), tp());  // [rows, r + 2n]
  SsmStepArgs args;
  args.u = u;
  const at::Tensor dt = projected.narrow(1, 0, r);
  if (fold_dt_in_step_) {  // dt_proj inside the step's kernel: one launch fewer
    args.dt = dt;
    args.dt_proj_weight = dt_proj_weight_;
  } else {
    args.delta = row_product(dt, dt_proj_weight_);  // [rows, d/tp], before its bias
  }
  args.A_log = A_log;
  args.B = projected.narrow(1, r, n);
  args.C = projected.narrow(1, r + n, n);
  args.D = D;
  args.z = xz.narrow(1, local, local);
  args.delta_bias = dt_proj_bias_;
  return ssm_state_step(args, states.ssm).unsqueeze(1);
}

}  // namespace triax::mamba
