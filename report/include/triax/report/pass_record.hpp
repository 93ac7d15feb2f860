// parallelism.pp_pass_record: this rank's record of its steps. The engine's PipelineStage reports
// each pass and transfer as it ends (triax_step_request.pass_timed, ABI 1.14); the training loop
// marks the step's parts (the engine, the gradients' reduction and norm, the optimizer). Each step
// becomes one JSON line of <run folder>/pass_record/rank<R>.jsonl (pass_record_format.hpp), so
// that the schedule simulator can be fed with the times the passes took inside the run. Off (the
// default) it times nothing.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "triax/abi.h"

namespace triax {

// Where this rank sits, written with every step.
struct PassRecordPlace {
  int rank = 0, pp_rank = 0, pp_size = 1, chunks = 1;
  int64_t micro_batches = 1;
  std::string engine;
  c10::Device device = c10::Device(c10::kCPU);
};

class PassRecord {
 public:
  // Appends to `path`, its folder created; an Error naming the key when it cannot be written.
  void open(const std::string& path, PassRecordPlace place);
  bool on() const { return out_.is_open(); }

  void begin_step(int64_t step);
  // The part of the step since the last mark (or the step's start) ended now.
  void part_done(const char* part);
  // A pass or transfer of the engine ended now, after `seconds`.
  void pass_timed(triax_pass_kind kind, int chunk, int micro_batch, double seconds);
  // Writes the step's line.
  void end_step();

 private:
  using Clock = std::chrono::steady_clock;
  struct Timed {
    triax_pass_kind kind;
    int chunk, micro_batch;
    double start_ms, ms;
  };
  double milliseconds_since_start() const;

  std::ofstream out_;
  std::string path_;
  PassRecordPlace place_;
  int64_t step_ = 0;
  Clock::time_point start_;
  double last_mark_ms_ = 0.0;
  std::vector<std::pair<std::string, double>> parts_;  // name, milliseconds
  std::vector<Timed> timeline_;
};

}  // namespace triax
