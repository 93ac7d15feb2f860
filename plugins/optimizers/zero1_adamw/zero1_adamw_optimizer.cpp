// ZeRO stage 1 AdamW: each data-parallel rank keeps fp32 master weights and both Adam moments for
// its shard of every parameter only (triax/zero_partition.hpp), so optimizer state per rank is
// about 1/dp of adamw's.
//
// Each parameter is sharded over its own gradient group (OptimizerParam::gradient_group): dp for
// dense parameters, edp for expert shards, whose copies only the edp ranks share.
//
// step() receives this rank's shard of each averaged gradient (the host reduce-scatters them into
// fp32 shards), updates its shard with the same AdamW arithmetic as the `adamw` plugin
// (adamw_update, which also applies the clipping coefficient and writes the shard into the
// parameter), and all-gathers the parameters over their group so every replica holds the same
// values again (zero1_parameters.hpp).
#include <ATen/ATen.h>

#include "adamw_update.hpp"
#include "triax/plugin.hpp"
#include "zero1_parameters.hpp"

namespace triax::plugins {

class Zero1AdamW final : public Optimizer {
 public:
  static constexpr triax_gradient_sharding kGradientSharding = TRIAX_GRADIENTS_DP_SHARDED;

  static std::unique_ptr<Zero1AdamW> create(const OptimizerContext& context, std::vector<OptimizerParam> params) {
    return std::make_unique<Zero1AdamW>(AdamWSettings::read(context.optimizer), context, params);
  }

  Zero1AdamW(AdamWSettings settings, const OptimizerContext& context, const std::vector<OptimizerParam>& params)
      : update_(settings), shards_(context, params, "zero1_adamw") {
    for (const ParameterShard& shard : shards_.shards())
      slots_.push_back(shard.range.length > 0
                           ? static_cast<int64_t>(update_.add(shard.master, shard.weight_decay, shard.lr_scale,
                                                              shard.own_master ? shard.live : at::Tensor()))
                           : -1);
  }

  void step(const std::vector<at::Tensor>& grads, double lr) override { step_scaled(grads, lr, at::Tensor()); }

  void step_scaled(const std::vector<at::Tensor>& grads, double lr, const at::Tensor& grad_scale) override {
    shards_.check_gradients(grads);
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> shard_grads;
    shard_grads.reserve(update_.size());
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] >= 0) shard_grads.push_back(grads[i].view(-1));
    update_.step(shard_grads, lr, grad_scale);  // also rounds each master into its shard of the parameter
    shards_.all_gather_parameters();
  }

  // Each rank lists its shard's state: elementwise entries start at the shard's first element.
  std::vector<OptimizerState> state() override {
    std::vector<OptimizerState> out;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i] < 0) continue;
      const ParameterShard& shard = shards_.shards()[i];
      const auto index = static_cast<int64_t>(i);
      AdamWUpdate::SlotState slot = update_.slot_state(static_cast<size_t>(slots_[i]));
      if (shard.own_master) out.push_back({index, "master", shard.master, shard.range.offset, false});
      out.push_back({index, "exp_avg", slot.exp_avg, shard.range.offset, false});
      out.push_back({index, "exp_avg_sq", slot.exp_avg_sq, shard.range.offset, false});
      out.push_back({index, "step", slot.step, 0, true});
    }
    return out;
  }

  void state_loaded() override { update_.state_loaded(); }

  int64_t state_bytes() const override { return update_.moment_bytes() + shards_.master_bytes(); }

 private:
  AdamWUpdate update_;
  Zero1Parameters shards_;
  std::vector<int64_t> slots_;  // per parameter: its slot in update_, or -1 for an empty shard
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::Zero1AdamW>(
    "zero1_adamw", "1.0.0",
    "ZeRO-1 AdamW: fp32 masters and moments sharded over data-parallel ranks, parameters all-gathered"))
