// The log lines of a run's steps. A logged step's values on the device (its losses and gradient
// norm) are read on the host one step late (StepReadBack), together with what the host knew of
// the step when it ended; then its metrics line is made (rates over the steps since the last
// line), reported, and checked by the non-finite guard. A step's time ends where its work ended
// on the device (a DeviceMark queued behind it), not when the host got to read it: the host reads
// a step inside the next one, but the run's last step at once. Every rank reads them (they are equal
// everywhere), so every rank stops on divergence. Unlogged steps get the live progress line.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>

#include "triax/core/step/device_mark.hpp"
#include "triax/core/step/step_read_back.hpp"
#include "triax/report/metrics.hpp"

namespace triax {

class NonFiniteGuard;
class RunReporter;
class StepLosses;

// What turns a step's time into throughput.
struct StepRates {
  int64_t tokens_per_step = 0;
  int64_t world_size = 1;
  double flops_per_token = 0.0;
  DevicePeak peak;
  int64_t total_steps = 0;
};

class StepLogger {
 public:
  // `first_step`: the step the run starts after (0, or the resumed checkpoint's).
  StepLogger(StepRates rates, c10::Device device, RunReporter& reporter, NonFiniteGuard& nonfinite,
             const StepLosses& losses, int64_t first_step);

  // A logged step: `known` holds what the host knows (step, learning rate, tokens, data
  // position); `values` are the step's [losses..., norm] on its device, read one step late. A
  // step still pending is reported first.
  void queue(StepMetrics known, const at::Tensor& values);
  // Reports the pending step, if any, waiting for its values.
  void flush();
  // An unlogged step: the live progress line.
  void step_done(int64_t step);
  // The time since the last line is not a step's (a checkpoint's save): rates restart after `step`.
  void restart_interval(int64_t step);
  double elapsed_seconds() const;

 private:
  using Clock = std::chrono::steady_clock;

  StepRates rates_;
  c10::Device device_;
  RunReporter& reporter_;
  NonFiniteGuard& nonfinite_;
  const StepLosses& losses_;
  StepReadBack read_back_;
  StepMetrics queued_;  // what the host knew of the step whose values read_back_ holds
  Clock::time_point start_;
  // The logging interval: from interval_start_, the steps after interval_first_.
  DeviceMark interval_start_;
  int64_t interval_first_;
  int64_t run_peak_memory_bytes_ = 0;  // the largest interval peak so far: the run's peak
};

}  // namespace triax
