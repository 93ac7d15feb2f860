// Reads a run's record of pipeline passes (parallelism.pp_pass_record, pass_record_format.hpp)
// for `triax inspect schedule --record`: per pipeline rank, the order its engine ran its passes in,
// the mean time of each kind of pass per model chunk, and the step's parts, over the steps kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline_schedule.hpp"
#include "schedule_simulator.hpp"

namespace triax::cli {

struct RecordedRank {
  int world_rank = 0;
  std::vector<plugins::Pass> order;  // the passes of the first kept step, in the order run
  // That step's passes and transfers in the order run; the transfers' peers are not recorded (-1).
  std::vector<plugins::ScheduleStep> steps;
  std::vector<plugins::ChunkPassTimes> chunk_times;  // per chunk, the mean of each kind (ms)
  // Per step (ms), medians over the kept steps: the receives and the sends (waits included), the
  // engine's part of the step (from the step's start), the rest of it, and the whole step.
  double receives = 0.0, sends = 0.0, engine = 0.0, outside = 0.0, step = 0.0;
  // Per step (ms), the median: how long the tensors sent waited on this rank between the end of the
  // pass that made them and the start of their send (hand-overs between its own chunks included).
  double held = 0.0;
};

struct RecordedRun {
  std::string engine;
  int pp_size = 1, chunks = 1, micro_batches = 1;
  std::vector<int64_t> steps;       // kept, in order
  std::vector<RecordedRank> ranks;  // by pipeline rank (the lowest world rank of each)
  // The median over the kept steps of the most any rank took (ms): its engine part, its whole step.
  double slowest_engine = 0.0, slowest_step = 0.0;
};

// Reads <run_folder>/pass_record/rank*.jsonl, leaving out each rank's first `skip_steps` steps
// of the record (the warm-up). Throws ConfigError for a missing or malformed record, and for a step
// whose passes are not each micro-batch's forward and backward (or B and W) once per chunk.
RecordedRun read_pass_record(const std::string& run_folder, int skip_steps);

}  // namespace triax::cli
