// AdamW (decoupled weight decay) with fp32 master weights.
//
// Parameters in fp32 are their own masters; lower-precision parameters get an fp32 master copy
// that the update works on and copies back. The update (adamw_update) is LibTorch's fused AdamW
// kernel (optimizer_factory.torch_adam_is_fused: true) or the same arithmetic in multi-tensor
// (foreach) operations.
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
      update_.add(master, p.weight_decay);
      if (own_master) copies_.push_back({p.param, master});
    }
  }

  void step(const std::vector<at::Tensor>& grads, double lr) override {
    at::NoGradGuard no_grad;
    update_.step(grads, lr);
    for (auto& copy : copies_) copy.param.copy_(copy.master);
  }

  int64_t state_bytes() const override {
    int64_t bytes = update_.moment_bytes();
    for (const auto& copy : copies_) bytes += static_cast<int64_t>(copy.master.nbytes());
    return bytes;
  }

 private:
  // A low-precision parameter and the fp32 master it is copied from after each update.
  struct MasterCopy {
    at::Tensor param, master;
  };

  AdamWUpdate update_;
  std::vector<MasterCopy> copies_;
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::AdamW>(
    "adamw", "1.0.0", "AdamW with fp32 master weights (LibTorch fused kernel or foreach ops)"))
