// The AdamW update (decoupled weight decay) that the `adamw` and `zero1_adamw` plugins share:
// its settings, read from the optimizer section, and fp32 master tensors with their moments,
// grouped by weight decay and learning-rate scale (spectral muP) so that each group is one
// LibTorch fused-kernel (or foreach) call.
// The plugins decide what a master is: a whole parameter, or one data-parallel rank's shard.
#pragma once

#include <ATen/core/Tensor.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace triax {
class ConfigReader;
}

namespace triax::plugins {

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool fused = true;  // optimizer_factory.torch_adam_is_fused: LibTorch's fused kernel, else foreach ops

  // From `optimizer.optimizer_factory`, strictly: an unknown key or a value out of range is a
  // ConfigError naming it.
  static AdamWSettings read(const YAML::Node& optimizer_section);
  // AdamW's keys of a factory that another optimizer reads strictly (muon's AdamW part); the
  // caller reads the rest, finishes the reader, then check()s.
  static AdamWSettings read_keys(ConfigReader& factory);
  // A value out of range is a ConfigError naming its key.
  void check(const ConfigReader& factory) const;
};

class AdamWUpdate {
 public:
  explicit AdamWUpdate(AdamWSettings settings) : settings_(settings) {}

  // Registers an fp32 master that step() updates in place; its gradient is step()'s grads[slot],
  // where slot is the returned index (masters are numbered in the order they are added). It
  // steps with the learning rate times lr_scale. `rounded_into`, when defined, is the
  // low-precision tensor (a parameter or its shard, the master's numel) that holds the master
  // rounded after every step and after state_loaded().
  size_t add(const at::Tensor& master, double weight_decay, double lr_scale = 1.0, const at::Tensor& rounded_into = {});
  size_t size() const { return count_; }

  // One step: grads[slot] (the master's numel; fp32 or a lower precision) for every registered
  // master, each multiplied by grad_scale (0-dim fp32, undefined = 1) in fp32 first. On CUDA with
  // the fused setting one kernel pass per group reads them as they are (adamw_kernel.hpp);
  // elsewhere low-precision gradients are converted and fp32 ones scaled in place.
  void step(const std::vector<at::Tensor>& grads, double learning_rate, const at::Tensor& grad_scale = {});

  // Bytes of the two moments (the masters are counted by the plugins, which own them).
  int64_t moment_bytes() const;

  // The live moments and step counter of the master registered as `slot` (for checkpoints).
  struct SlotState {
    at::Tensor exp_avg, exp_avg_sq, step;
  };
  SlotState slot_state(size_t slot) const;
  // After a checkpoint was copied into the state: refresh the host-side step counts and the
  // rounded copies. The masters of one weight-decay group step together, so their counters must
  // agree.
  void state_loaded();

 private:
  struct Group {
    double weight_decay = 0.0;
    double lr_scale = 1.0;
    int64_t step_count = 0;     // host-side copy of `steps`, so the foreach path never synchronises
    std::vector<size_t> slots;  // grads[slots[i]] belongs to masters[i]
    std::vector<at::Tensor> masters, exp_avg, exp_avg_sq, steps;
    std::vector<at::Tensor> rounded;  // per master: its low-precision copy, or undefined
  };

  // The update of one group with fp32 gradients already scaled: LibTorch's fused kernel or foreach ops.
  void libtorch_update(Group& group, const std::vector<at::Tensor>& grads, double learning_rate) const;
  void foreach_update(Group& group, const std::vector<at::Tensor>& grads, double learning_rate) const;
  static void round_masters(Group& group);

  AdamWSettings settings_;
  std::map<std::pair<double, double>, Group> groups_;  // by (weight decay, lr scale)
  size_t count_ = 0;  // masters registered so far
  std::vector<std::pair<Group*, size_t>> slot_index_;  // slot -> its group and position there
};

}  // namespace triax::plugins
