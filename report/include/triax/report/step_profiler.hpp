// nanotron's profiler section: a LibTorch (Kineto) profiler trace of the steps that
// torch.profiler.schedule would choose: skip the first `skip_first` steps of this run, then
// `repeat` cycles (0: until the end) of `wait` steps off, `warmup` steps profiled and
// discarded, `active` steps recorded. At the end of each cycle's active steps every rank writes
// <export_path>/rank<R>_steps<A>-<B>.pt.trace.json, a Chrome trace that TensorBoard's
// profiler plugin, chrome://tracing and Perfetto open.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "triax/report/profiler_options.hpp"

namespace triax {

class StepProfiler {
 public:
  // Creates the export folder and checks that this rank can write there: ConfigError naming
  // options.key before any training otherwise. No options: no profiling.
  StepProfiler(const std::optional<ProfilerOptions>& options, int rank, bool cuda);
  ~StepProfiler();

  void before_step(int64_t step);
  void after_step(int64_t step);
  // Saves a trace still being recorded (the run ended inside an active window).
  void finish();

  // "every ... steps into FOLDER", or "" without a profiler section.
  std::string describe() const;

 private:
  enum class Phase { off, warmup, active };
  Phase phase_of(int64_t index) const;  // index: steps of this run before this one
  void save(int64_t last_step);

  std::optional<ProfilerOptions> options_;
  int rank_ = 0;
  bool cuda_ = false;
  int64_t index_ = 0;  // steps seen so far in this process
  bool prepared_ = false, recording_ = false;
  int64_t first_recorded_step_ = 0, last_step_ = 0;
};

}  // namespace triax
