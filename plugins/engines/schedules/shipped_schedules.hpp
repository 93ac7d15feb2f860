// The order of passes of every shipped engine, by name, for the schedule simulator
// (`triax inspect schedule`) and the tests: afab (every forward, then every backward), 1f1b,
// interleaved_1f1b (two chunks per rank), zb_h1 and zb_v. Each comes from the code its engine
// runs (interleaved_schedule.hpp, zero_bubble_schedule.hpp), so a prediction is the engine's.
#pragma once

#include <string>
#include <vector>

#include "pipeline_schedule.hpp"
#include "schedule_simulator.hpp"
#include "triax/abi.h"

namespace triax::plugins {

struct EngineSchedule {
  std::string engine;
  ScheduleShape shape;
  triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED;
  std::vector<std::vector<Pass>> passes;  // per rank
};

std::vector<std::string> shipped_schedule_names();

// `engine`'s passes at `pp_size` ranks and `micro_batches` per step; the zero-bubble engines order
// theirs for the stage times `times`, as parallelism.pp_pass_times makes them. Throws
// std::invalid_argument for an unknown engine or a shape it refuses (the message as the engine
// words it).
EngineSchedule shipped_schedule(const std::string& engine, int pp_size, int micro_batches,
                                const PassTimes& times = PassTimes{});

}  // namespace triax::plugins
