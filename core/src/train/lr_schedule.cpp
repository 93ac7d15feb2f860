#include "train/lr_schedule.hpp"

#include <cmath>

namespace triax {

double LearningRateSchedule::value_at(int64_t t) const {
  const LrSchedulerConfig& c = config_;
  const double lr = c.learning_rate;
  if (c.lr_warmup_steps == 0 && c.lr_decay_steps == 0) return lr;
  if (t <= c.lr_warmup_steps) {
    if (c.lr_warmup_style == "constant") return lr;
    return lr * static_cast<double>(t) / static_cast<double>(std::max<int64_t>(c.lr_warmup_steps, 1));
  }
  if (t < c.lr_decay_starting_step) return lr;
  if (t < c.lr_decay_starting_step + c.lr_decay_steps) {
    const double progress = static_cast<double>(t - c.lr_decay_starting_step) / static_cast<double>(c.lr_decay_steps);
    if (c.lr_decay_style == "cosine")
      return c.min_decay_lr + (lr - c.min_decay_lr) * (1 + std::cos(M_PI * progress)) / 2;
    if (c.lr_decay_style == "1-sqrt") return c.min_decay_lr + (lr - c.min_decay_lr) * (1 - std::sqrt(progress));
    return c.min_decay_lr + (lr - c.min_decay_lr) * (1 - progress);  // linear
  }
  return c.min_decay_lr;
}

}  // namespace triax
