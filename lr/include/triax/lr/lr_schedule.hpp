// nanotron's learning-rate schedule: warm-up (linear from 0, or constant), an optional constant
// phase until lr_decay_starting_step, decay (linear, cosine or 1-sqrt) over lr_decay_steps down
// to min_decay_lr, then min_decay_lr. As in nanotron (a LambdaLR stepped after each optimizer
// step), training step s (1-based) uses the schedule's value at s - 1.
#pragma once

#include <cstdint>

#include "triax/config/train_config.hpp"

namespace triax {

class LearningRateSchedule {
 public:
  explicit LearningRateSchedule(const LrSchedulerConfig& config) : config_(config) {}
  // The schedule's value after `completed_steps` optimizer steps.
  double value_at(int64_t completed_steps) const;
  // The learning rate used by training step `step` (1-based).
  double for_step(int64_t step) const { return value_at(step - 1); }

 private:
  LrSchedulerConfig config_;
};

}  // namespace triax
