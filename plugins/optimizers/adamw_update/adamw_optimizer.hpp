// AdamW (decoupled weight decay) with fp32 master weights over the tensors the host hands over as
// parameters: whole parameters (the `adamw` plugin) or ZeRO-3 shards (`zero3_adamw`, whose
// parameters are the model's 1-D shards and whose gradients arrive reduce-scattered into them).
//
// Parameters in fp32 are their own masters; lower-precision parameters get an fp32 master copy
// that the update works on and rounds back into them. The update (adamw_update) is, with
// optimizer_factory.torch_adam_is_fused: true, one fused kernel pass on CUDA that reads the
// gradients in the dtype the host hands them over and applies the clipping coefficient (LibTorch's
// fused AdamW kernel on CPU), or else the same arithmetic in multi-tensor (foreach) operations.
// Empty parameters (the last ranks' ZeRO-3 shards when dp does not divide a parameter) have no state.
#pragma once

#include <ATen/ATen.h>

#include "adamw_update.hpp"
#include "triax/plugin.hpp"

namespace triax::plugins {

template <triax_gradient_sharding Sharding>
class AdamWOptimizer final : public Optimizer {
 public:
  static constexpr triax_gradient_sharding kGradientSharding = Sharding;

  static std::unique_ptr<AdamWOptimizer> create(const OptimizerContext& context, std::vector<OptimizerParam> params) {
    return std::make_unique<AdamWOptimizer>(AdamWSettings::read(context.optimizer), std::move(params));
  }

  AdamWOptimizer(AdamWSettings settings, std::vector<OptimizerParam> params) : update_(settings) {
    for (const OptimizerParam& p : params) {
      Entry entry;
      if (p.param.numel() > 0) {
        entry.own_master = p.param.scalar_type() != at::kFloat;
        entry.master = entry.own_master ? p.param.detach().to(at::kFloat).clone() : p.param.detach();
        entry.slot = static_cast<int64_t>(
            update_.add(entry.master, p.weight_decay, p.lr_scale, entry.own_master ? p.param.detach() : at::Tensor()));
      }
      entries_.push_back(entry);
    }
  }

  std::vector<OptimizerState> state() override {
    std::vector<OptimizerState> out;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& entry = entries_[i];
      if (entry.slot < 0) continue;
      const auto index = static_cast<int64_t>(i);
      AdamWUpdate::SlotState slot = update_.slot_state(static_cast<size_t>(entry.slot));
      if (entry.own_master) out.push_back({index, "master", entry.master.view(-1), 0, false});
      out.push_back({index, "exp_avg", slot.exp_avg.view(-1), 0, false});
      out.push_back({index, "exp_avg_sq", slot.exp_avg_sq.view(-1), 0, false});
      out.push_back({index, "step", slot.step, 0, true});
    }
    return out;
  }

  void state_loaded() override { update_.state_loaded(); }

  void step(const std::vector<at::Tensor>& grads, double lr) override { step_scaled(grads, lr, at::Tensor()); }
  void step_scaled(const std::vector<at::Tensor>& grads, double lr, const at::Tensor& grad_scale) override {
    if (grads.size() != entries_.size())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "adamw step: " + std::to_string(grads.size()) + " gradients for " +
                                                    std::to_string(entries_.size()) + " parameters");
    std::vector<at::Tensor> slot_grads;
    slot_grads.reserve(update_.size());
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].slot >= 0) slot_grads.push_back(grads[i]);
    update_.step(slot_grads, lr, grad_scale);
  }

  int64_t state_bytes() const override {
    int64_t bytes = update_.moment_bytes();
    for (const Entry& entry : entries_)
      if (entry.own_master) bytes += static_cast<int64_t>(entry.master.nbytes());
    return bytes;
  }

 private:
  struct Entry {
    at::Tensor master;  // fp32: the parameter itself, or its own copy
    bool own_master = false;
    int64_t slot = -1;  // in update_, or -1 for an empty parameter
  };

  AdamWUpdate update_;
  std::vector<Entry> entries_;  // per parameter
};

}  // namespace triax::plugins
