#include "triax/lr/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace triax {
namespace {

// A decay style: what it adds to min_decay_lr, from `span` = learning_rate - min_decay_lr and the
// decay's `progress` (0 at its start, 1 at its end). A new style is one line here and its name in
// the optimizer section's reader (config/src/optimizer_section.cpp).
struct DecayStyle {
  const char* name;
  double (*above_minimum)(double span, double progress);
};

constexpr DecayStyle kDecayStyles[] = {
    {"linear", [](double span, double progress) { return span * (1 - progress); }},
    {"cosine", [](double span, double progress) { return span * (1 + std::cos(M_PI * progress)) / 2; }},
    {"1-sqrt", [](double span, double progress) { return span * (1 - std::sqrt(progress)); }},
};

// The config admits only the styles above; anything else decays linearly.
const DecayStyle& decay_style(const std::string& name) {
  for (const DecayStyle& style : kDecayStyles)
    if (name == style.name) return style;
  return kDecayStyles[0];
}

}  // namespace

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
    return c.min_decay_lr + decay_style(c.lr_decay_style).above_minimum(lr - c.min_decay_lr, progress);
  }
  return c.min_decay_lr;
}

}  // namespace triax
