// A token folder's samples cut into a training part and a held-out (validation) part, by
// sample, deterministically: a SamplePermutation keyed by (data seed, dataset) orders the N
// samples; its first H positions are held out, the other N - H are the training samples (the
// mixture then shuffles those per epoch as usual). H = round(fraction x N), at least 1 and at
// most N - 1. Without a fraction nothing is held out and training sample k is folder sample k,
// exactly the stream of a run without validation data.
#pragma once

#include <cstdint>
#include <optional>

#include "triax/data/sample_permutation.hpp"

namespace triax::data {

class HeldOutSplit {
 public:
  // `fraction` in (0, 1) (checked by the config reader), or 0 for no held-out part.
  HeldOutSplit(int64_t samples, double fraction, uint64_t key);

  int64_t training_samples() const { return samples_ - held_out_; }
  int64_t held_out_samples() const { return held_out_; }
  // The folder sample of training sample k (< training_samples()).
  int64_t training_sample(int64_t k) const;
  // The folder sample of held-out sample j (< held_out_samples()).
  int64_t held_out_sample(int64_t j) const;

 private:
  int64_t samples_;
  int64_t held_out_ = 0;
  std::optional<SamplePermutation> order_;  // only when something is held out
};

}  // namespace triax::data
