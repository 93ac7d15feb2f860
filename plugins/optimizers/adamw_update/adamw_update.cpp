#include "adamw_update.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <string>

#include "triax/config_reader.hpp"
#include "triax/error.hpp"
#include "triax/optimizer.hpp"

#if TRIAX_ADAMW_KERNEL
#include "adamw_cuda.hpp"
#endif

namespace triax::plugins {

AdamWSettings AdamWSettings::read(const YAML::Node& optimizer_section) {
  ConfigReader optimizer(optimizer_section, "optimizer");
  ConfigReader factory = optimizer.section("optimizer_factory");
  factory.required<std::string>("name");
  AdamWSettings s = read_keys(factory);
  factory.finish();
  s.check(factory);
  return s;
}

AdamWSettings AdamWSettings::read_keys(ConfigReader& factory) {
  AdamWSettings s;
  s.beta1 = factory.get<double>("adam_beta1", s.beta1);
  s.beta2 = factory.get<double>("adam_beta2", s.beta2);
  s.eps = factory.get<double>("adam_eps", s.eps);
  s.fused = factory.get<bool>("torch_adam_is_fused", s.fused);
  return s;
}

void AdamWSettings::check(const ConfigReader& factory) const {
  if (beta1 < 0 || beta1 >= 1) factory.fail("adam_beta1", "expected a value in [0, 1)");
  if (beta2 < 0 || beta2 >= 1) factory.fail("adam_beta2", "expected a value in [0, 1)");
  if (eps <= 0) factory.fail("adam_eps", "expected a positive number");
}

size_t AdamWUpdate::add(const at::Tensor& master, double weight_decay, double lr_scale, const at::Tensor& rounded_into) {
  if (master.scalar_type() != at::kFloat)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "AdamW master weights must be fp32, got " + std::string(c10::toString(master.scalar_type())));
  Group& group = groups_[{weight_decay, lr_scale}];
  group.weight_decay = weight_decay;
  group.lr_scale = lr_scale;
  const size_t slot = count_++;
  group.slots.push_back(slot);
  group.masters.push_back(master);
  group.exp_avg.push_back(at::zeros_like(master));
  group.exp_avg_sq.push_back(at::zeros_like(master));
  group.steps.push_back(at::zeros({}, master.options()));
  group.rounded.push_back(rounded_into);
  slot_index_.emplace_back(&group, group.masters.size() - 1);  // std::map nodes never move
  return slot;
}

void AdamWUpdate::step(const std::vector<at::Tensor>& grads, double lr, const at::Tensor& grad_scale) {
  if (grads.size() != count_)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "AdamW step: " + std::to_string(grads.size()) + " gradients for " +
                                                  std::to_string(count_) + " master tensors");
  at::NoGradGuard no_grad;
  for (auto& [key, group] : groups_) {
    const double group_lr = lr * group.lr_scale;
    std::vector<at::Tensor> group_grads;
    group_grads.reserve(group.slots.size());
    for (size_t slot : group.slots) group_grads.push_back(grads[slot]);
    ++group.step_count;
    at::_foreach_add_(group.steps, 1.0);  // the fused kernels read the counters, never bump them
#if TRIAX_ADAMW_KERNEL
    const AdamWGroupTensors tensors{group.masters, group.exp_avg, group.exp_avg_sq, group_grads, group.rounded};
    if (settings_.fused && adamw_kernel_applies(tensors, grad_scale)) {
      const double t = static_cast<double>(group.step_count);
      adamw_kernel::Scalars scalars;
      scalars.learning_rate = group_lr;
      scalars.beta1 = settings_.beta1;
      scalars.beta2 = settings_.beta2;
      scalars.weight_decay = group.weight_decay;
      scalars.eps = settings_.eps;
      scalars.bias_correction1 = static_cast<float>(1.0 - std::pow(settings_.beta1, t));
      scalars.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(settings_.beta2, t)));
      adamw_kernel_step(tensors, grad_scale, scalars);
      continue;
    }
#endif
    std::vector<at::Tensor> clipped = clipped_full_precision(group_grads, grad_scale);
    for (size_t i = 0; i < clipped.size(); ++i)  // the masters' dtype (fp32) and shape
      clipped[i] = clipped[i].to(at::kFloat).reshape(group.masters[i].sizes());
    libtorch_update(group, clipped, group_lr);
    round_masters(group);
  }
}

void AdamWUpdate::libtorch_update(Group& group, const std::vector<at::Tensor>& grads, double lr) const {
  if (settings_.fused)
    at::_fused_adamw_(group.masters, grads, group.exp_avg, group.exp_avg_sq, {}, group.steps, lr, settings_.beta1,
                      settings_.beta2, group.weight_decay, settings_.eps, /*amsgrad=*/false, /*maximize=*/false);
  else
    foreach_update(group, grads, lr);
}

void AdamWUpdate::round_masters(Group& group) {
  for (size_t i = 0; i < group.masters.size(); ++i)
    if (group.rounded[i].defined()) group.rounded[i].view(group.masters[i].sizes()).copy_(group.masters[i]);
}

// The same update as the fused kernel, spelled out:
//   p *= 1 - lr·wd;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²;
//   p -= lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
void AdamWUpdate::foreach_update(Group& group, const std::vector<at::Tensor>& grads, double lr) const {
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

AdamWUpdate::SlotState AdamWUpdate::slot_state(size_t slot) const {
  if (slot >= slot_index_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "AdamW: no master in slot " + std::to_string(slot));
  const auto& [group, i] = slot_index_[slot];
  return {group->exp_avg[i], group->exp_avg_sq[i], group->steps[i]};
}

void AdamWUpdate::state_loaded() {
  at::NoGradGuard no_grad;
  for (auto& [key, group] : groups_) {
    round_masters(group);
    if (group.steps.empty()) continue;
    at::Tensor counters = at::stack(group.steps).cpu();
    const double first = counters[0].item<double>();
    if (!at::all(counters == first).item<bool>())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  "AdamW: the loaded step counters of the masters with weight decay " +
                      std::to_string(group.weight_decay) + " and lr scale " + std::to_string(group.lr_scale) +
                      " disagree (they step together)");
    group.step_count = static_cast<int64_t>(first);
  }
}

int64_t AdamWUpdate::moment_bytes() const {
  int64_t bytes = 0;
  for (const auto& [key, group] : groups_)
    for (size_t i = 0; i < group.masters.size(); ++i)
      bytes += static_cast<int64_t>(group.exp_avg[i].nbytes() + group.exp_avg_sq[i].nbytes());
  return bytes;
}

}  // namespace triax::plugins
