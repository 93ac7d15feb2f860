// What a non-finite loss or gradient norm does (general.nonfinite_policy):
//   stop: the run stops with an error naming the step and the last good checkpoint. The values
//         are read where the loop reads them anyway (logged steps) and before every save, so a
//         checkpoint never holds a diverged model and steps cost no extra host synchronisation.
//   skip: the step's update is dropped before the optimizer runs (parameters and optimizer state
//         stay as they were; the data and the learning-rate schedule move on), logged and
//         counted; more than general.nonfinite_max_consecutive_skips in a row stop the run.
//         Costs one host read of the loss and the norm per step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "triax/config/train_config.hpp"

namespace triax {

class NonFiniteGuard {
 public:
  explicit NonFiniteGuard(const TrainConfig& config);

  // Before the optimizer step: false when the step must be skipped (skip policy only). Throws
  // when too many steps in a row were skipped. `loss` and `norm` are the step's device scalars.
  bool admit(int64_t step, const at::Tensor& loss, const at::Tensor& norm);
  // Values read on the host (a logged step, before a save): throws under the stop policy when
  // either is non-finite. Under the skip policy non-finite steps were skipped already.
  void check(int64_t step, double loss, double norm) const;
  // Reads the values first: for a save that is not at a logged step.
  void check(int64_t step, const at::Tensor& loss, const at::Tensor& norm) const;

  bool skips() const { return skip_; }
  int64_t skipped_steps() const { return skipped_; }

 private:
  std::string last_good_checkpoint() const;

  bool skip_;
  int64_t max_consecutive_;
  std::string checkpoints_path_;
  int64_t skipped_ = 0;
  int64_t consecutive_ = 0;
};

}  // namespace triax
