#include "triax/data/held_out_split.hpp"

#include <algorithm>
#include <cmath>

#include "triax/error.hpp"

namespace triax::data {

HeldOutSplit::HeldOutSplit(int64_t samples, double fraction, uint64_t key) : samples_(samples) {
  if (fraction <= 0.0) return;
  if (samples < 2)
    throw ConfigError("holds " + std::to_string(samples) + " sample(s): at least 2 are needed to hold some out");
  const auto rounded = static_cast<int64_t>(std::llround(fraction * static_cast<double>(samples)));
  held_out_ = std::clamp<int64_t>(rounded, 1, samples - 1);
  order_.emplace(samples, key);
}

int64_t HeldOutSplit::training_sample(int64_t k) const {
  if (k < 0 || k >= training_samples())
    throw Error("training sample " + std::to_string(k) + " of " + std::to_string(training_samples()));
  return order_ ? (*order_)(held_out_ + k) : k;
}

int64_t HeldOutSplit::held_out_sample(int64_t j) const {
  if (j < 0 || j >= held_out_) throw Error("held-out sample " + std::to_string(j) + " of " + std::to_string(held_out_));
  return (*order_)(j);
}

}  // namespace triax::data
