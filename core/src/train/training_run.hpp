// One call of Trainer::train: the loop over the steps left, with what it keeps for the whole run
// (the outputs, the profiler, the learning-rate schedule, the non-finite guard, the preemption
// signals and the step log), and the summary it returns.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "triax/lr/lr_schedule.hpp"
#include "train/nonfinite_guard.hpp"
#include "train/step_logger.hpp"
#include "train/validation.hpp"
#include "triax/core/trainer.hpp"
#include "triax/faults/preemption.hpp"
#include "triax/report/run_reporter.hpp"
#include "triax/report/step_profiler.hpp"

namespace triax {

class TrainingRun {
 public:
  // Opens every output before the first step: one that cannot be written stops the run now.
  explicit TrainingRun(TrainerState& state);

  TrainSummary run();

 private:
  // One step's values on the device, not read back.
  struct StepValues {
    at::Tensor losses;  // LM loss, then the auxiliary losses (StepLosses::reduce)
    at::Tensor norm;    // the gradient norm before clipping
  };

  // Forward and backward over the step's micro-batches, the gradients' reduction, the optimizer.
  StepValues train_step(int64_t step, double learning_rate);
  // The step's log line (read one step late) or the live progress line.
  void report(int64_t step, const StepValues& values, double learning_rate);
  // The validation loss after `step`, when tokens.val_check_interval says so; outside the steps' rates.
  void validate(int64_t step);
  // Saves when the checkpoint interval or a preemption signal says so; true when the run stops.
  bool save_or_stop(int64_t step, const StepValues& values);
  void finish();
  // parallelism.pp_pass_record: this rank's record, opened before the first step.
  void open_pass_record();
  // Whether `step` has a log line (logging.iteration_step_info_interval, and the last step).
  bool logged(int64_t step) const;

  TrainerState& s_;
  const TrainConfig& c_;
  const std::string resolved_config_;  // what checkpoints store
  RunReporter reporter_;
  StepProfiler profiler_;
  LearningRateSchedule schedule_;
  NonFiniteGuard nonfinite_;
  const preemption::SignalWatch preemption_watch_;
  Validation validation_;
  std::optional<StepLogger> logger_;  // from the first step on
  std::vector<at::Tensor> losses_, norms_;  // of every step, read at the end
  TrainSummary summary_;
};

}  // namespace triax
