// AdamW (decoupled weight decay) with fp32 master weights.
//
// Parameters in fp32 are their own masters; lower-precision parameters get an fp32 master copy
// that the update works on and rounds back into them. The update (adamw_update) is, with
// optimizer_factory.torch_adam_is_fused: true, one fused kernel pass on CUDA that reads the
// gradients in the dtype the host hands them over and applies the clipping coefficient (LibTorch's
// fused AdamW kernel on CPU), or else the same arithmetic in multi-tensor (foreach) operations.
#include <ATen/ATen.h>

#include "adamw_update.hpp"
#include "triax/plugin.hpp"

namespace triax::plugins {

class AdamW final : public Optimizer {
 public:
  static std::unique_ptr<AdamW> create(const OptimizerContext& context, std::vector<OptimizerParam> params) {
    return std::make_unique<AdamW>(AdamWSettings::read(context.optimizer), std::move(params));
  }

  AdamW(AdamWSettings settings, std::vector<OptimizerParam> params) : update_(settings) {
    for (const OptimizerParam& p : params) {
      const bool own_master = p.param.scalar_type() != at::kFloat;
      at::Tensor master = own_master ? p.param.detach().to(at::kFloat).clone() : p.param.detach();
      slots_.push_back(update_.add(master, p.weight_decay, p.lr_scale, own_master ? p.param.detach() : at::Tensor()));
      masters_.push_back(own_master ? master : at::Tensor());
    }
  }

  std::vector<OptimizerState> state() override {
    std::vector<OptimizerState> out;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const auto index = static_cast<int64_t>(i);
      AdamWUpdate::SlotState slot = update_.slot_state(slots_[i]);
      if (masters_[i].defined()) out.push_back({index, "master", masters_[i].view(-1), 0, false});
      out.push_back({index, "exp_avg", slot.exp_avg.view(-1), 0, false});
      out.push_back({index, "exp_avg_sq", slot.exp_avg_sq.view(-1), 0, false});
      out.push_back({index, "step", slot.step, 0, true});
    }
    return out;
  }

  void state_loaded() override { update_.state_loaded(); }

  void step(const std::vector<at::Tensor>& grads, double lr) override { update_.step(grads, lr); }
  void step_scaled(const std::vector<at::Tensor>& grads, double lr, const at::Tensor& grad_scale) override {
    update_.step(grads, lr, grad_scale);
  }

  int64_t state_bytes() const override {
    int64_t bytes = update_.moment_bytes();
    for (const at::Tensor& master : masters_)
      if (master.defined()) bytes += static_cast<int64_t>(master.nbytes());
    return bytes;
  }

 private:
  AdamWUpdate update_;
  std::vector<size_t> slots_;        // per parameter: its master's slot in update_
  std::vector<at::Tensor> masters_;  // per parameter: its own fp32 master, or undefined (fp32 parameters)
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::AdamW>(
    "adamw", "1.0.0", "AdamW with fp32 master weights (LibTorch fused kernel or foreach ops)"))
