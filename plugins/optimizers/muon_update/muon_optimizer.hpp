// Muon (momentum orthogonalised by Newton–Schulz) for the hidden matrices and AdamW for the rest
// (muon_selection.hpp), over whole parameters (the `muon` plugin) or ZeRO-1 shards (`zero1_muon`:
// masters, moments and momenta for this rank's range of every parameter only, the parameters
// all-gathered after the step, as zero1_adamw does). The Muon matrices are orthogonalised whole on
// one owning rank each (muon_update.hpp), so every mesh computes the single rank's update.
//
// Checkpoints hold, per Muon parameter, "momentum" (and "master" for low-precision parameters),
// elementwise like AdamW's moments, so they reshard to any topology and to the other form.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adamw_update.hpp"
#include "muon_settings.hpp"
#include "muon_update.hpp"
#include "triax/plugin.hpp"
#include "zero1_parameters.hpp"

namespace triax::plugins {

class MuonOptimizer : public Optimizer {
 public:
  // `plugin` names it in messages; `dp_sharded`: ZeRO-1.
  MuonOptimizer(const OptimizerContext& context, const std::vector<OptimizerParam>& params, bool dp_sharded,
                const std::string& plugin);

  void step(const std::vector<at::Tensor>& grads, double learning_rate) override;
  void step_scaled(const std::vector<at::Tensor>& grads, double learning_rate, const at::Tensor& grad_scale) override;
  std::vector<OptimizerState> state() override;
  void state_loaded() override;
  int64_t state_bytes() const override;
  std::string resolved_config() const override { return settings_.resolved_yaml(); }
  // QK-clip (MuonClip): the threshold of optimizer_factory.qk_clip_threshold, and the host's
  // factors applied to parameters and masters alike.
  double qk_clip_threshold() const override { return settings_.qk_clip_threshold.value_or(0.0); }
  void scale_parameters(const std::vector<std::pair<int64_t, at::Tensor>>& factors) override;

 private:
  struct Entry {
    bool muon = false;
    int64_t slot = -1;  // in muon_ or adamw_; -1: an empty AdamW shard
  };

  MuonSettings settings_;
  std::string plugin_;
  std::optional<Zero1Parameters> zero1_;  // ZeRO-1 only
  std::vector<ParameterShard> pieces_;    // per parameter: what this rank updates
  std::vector<Entry> entries_;            // per parameter
  AdamWUpdate adamw_;
  std::unique_ptr<MuonUpdate> muon_;
};

// The plugin classes: their gradient sharding is read at registration.
template <triax_gradient_sharding Sharding>
class MuonPlugin final : public MuonOptimizer {
 public:
  static constexpr triax_gradient_sharding kGradientSharding = Sharding;
  static_assert(Sharding == TRIAX_GRADIENTS_WHOLE || Sharding == TRIAX_GRADIENTS_DP_SHARDED);

  static std::unique_ptr<MuonPlugin> create(const OptimizerContext& context, std::vector<OptimizerParam> params) {
    return std::make_unique<MuonPlugin>(context, params);
  }
  MuonPlugin(const OptimizerContext& context, const std::vector<OptimizerParam>& params)
      : MuonOptimizer(context, params, Sharding == TRIAX_GRADIENTS_DP_SHARDED,
                      Sharding == TRIAX_GRADIENTS_WHOLE ? "muon" : "zero1_muon") {}
};

}  // namespace triax::plugins
