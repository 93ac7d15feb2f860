// AdamW (decoupled weight decay) with fp32 master weights.
//
// Parameters in fp32 are their own masters; lower-precision parameters get an fp32 master copy
// that the update works on and copies back. The update is LibTorch's fused AdamW kernel
// (optimizer_factory.torch_adam_is_fused: true) or the same arithmetic in multi-tensor
// (foreach) operations. Parameters are grouped by weight decay so each group is one call.
#include <ATen/ATen.h>

#include <map>

#include "triax/plugin.hpp"

namespace triax::plugins {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool fused = true;

  static AdamWSettings read(const YAML::Node& optimizer_section) {
    ConfigReader optimizer(optimizer_section, "optimizer");
    ConfigReader factory = optimizer.section("optimizer_factory");
    AdamWSettings s;
    factory.required<std::string>("name");
    s.beta1 = factory.get<double>("adam_beta1", s.beta1);
    s.beta2 = factory.get<double>("adam_beta2", s.beta2);
    s.eps = factory.get<double>("adam_eps", s.eps);
    s.fused = factory.get<bool>("torch_adam_is_fused", s.fused);
    factory.finish();
    if (s.beta1 < 0 || s.beta1 >= 1) factory.fail("adam_beta1", "expected a value in [0, 1)");
    if (s.beta2 < 0 || s.beta2 >= 1) factory.fail("adam_beta2", "expected a value in [0, 1)");
    if (s.eps <= 0) factory.fail("adam_eps", "expected a positive number");
    return s;
  }
};

class AdamW final : public Optimizer {
 public:
  static std::unique_ptr<AdamW> create(const OptimizerContext& context, std::vector<OptimizerParam> params) {
    return std::make_unique<AdamW>(AdamWSettings::read(context.optimizer), std::move(params));
  }

  AdamW(AdamWSettings settings, std::vector<OptimizerParam> params) : settings_(settings) {
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& p = params[i].param;
      Group& group = groups_[params[i].weight_decay];
      group.weight_decay = params[i].weight_decay;
      group.indices.push_back(i);
      group.params.push_back(p);
      const bool own_master = p.scalar_type() != at::kFloat;
      at::Tensor master = own_master ? p.detach().to(at::kFloat).clone() : p.detach();
      group.masters.push_back(master);
      group.own_master.push_back(own_master);
      group.exp_avg.push_back(at::zeros_like(master));
      group.exp_avg_sq.push_back(at::zeros_like(master));
      group.steps.push_back(at::zeros({}, master.options()));
    }
  }

  void step(const std::vector<at::Tensor>& grads, double lr) override {
    at::NoGradGuard no_grad;
    for (auto& [decay, group] : groups_) {
      std::vector<at::Tensor> group_grads;
      group_grads.reserve(group.indices.size());
      for (size_t index : group.indices) group_grads.push_back(grads.at(index));
      ++group.step_count;
      at::_foreach_add_(group.steps, 1.0);  // the fused kernel reads the counters, never bumps them
      if (settings_.fused)
        at::_fused_adamw_(group.masters, group_grads, group.exp_avg, group.exp_avg_sq, {}, group.steps, lr,
                          settings_.beta1, settings_.beta2, group.weight_decay, settings_.eps,
                          /*amsgrad=*/false, /*maximize=*/false);
      else
        foreach_update(group, group_grads, lr);
      for (size_t i = 0; i < group.params.size(); ++i)
        if (group.own_master[i]) group.params[i].copy_(group.masters[i]);
    }
  }

  int64_t state_bytes() const override {
    int64_t bytes = 0;
    for (const auto& [decay, group] : groups_)
      for (size_t i = 0; i < group.masters.size(); ++i) {
        bytes += group.exp_avg[i].nbytes() + group.exp_avg_sq[i].nbytes();
        if (group.own_master[i]) bytes += group.masters[i].nbytes();
      }
    return bytes;
  }

 private:
  struct Group {
    double weight_decay = 0.0;
    int64_t step_count = 0;  // host-side copy of `steps`, so the foreach path never synchronises
    std::vector<size_t> indices;
    std::vector<at::Tensor> params, masters, exp_avg, exp_avg_sq, steps;
    std::vector<bool> own_master;  // false: the fp32 parameter is its own master
  };

  // The same update as the fused kernel, spelled out:
  //   p *= 1 - lr·wd;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²;
  //   p -= lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
  void foreach_update(Group& group, const std::vector<at::Tensor>& grads, double lr) const {
    if (group.weight_decay != 0.0) at::_foreach_mul_(group.masters, 1.0 - lr * group.weight_decay);
    at::_foreach_lerp_(group.exp_avg, grads, 1.0 - settings_.beta1);
    at::_foreach_mul_(group.exp_avg_sq, settings_.beta2);
    at::_foreach_addcmul_(group.exp_avg_sq, grads, grads, 1.0 - settings_.beta2);
    const double t = static_cast<double>(group.step_count);
    const double bias1 = 1.0 - std::pow(settings_.beta1, t);
    const double bias2 = 1.0 - std::pow(settings_.beta2, t);
    for (size_t i = 0; i < group.masters.size(); ++i) {
      at::Tensor denom = group.exp_avg_sq[i].sqrt().div_(std::sqrt(bias2)).add_(settings_.eps);
      group.masters[i].addcdiv_(group.exp_avg[i], denom, -lr / bias1);
    }
  }

  AdamWSettings settings_;
  std::map<double, Group> groups_;
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::AdamW>(
    "adamw", "1.0.0", "AdamW with fp32 master weights (LibTorch fused kernel or foreach ops)"))
