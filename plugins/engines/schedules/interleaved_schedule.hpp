// The interleaved 1F1B schedule (Megatron-LM's "virtual pipeline"), as data: each pipeline rank
// holds `chunks` model chunks, chunk c of rank r being virtual stage c * pp + r, and runs the
// forward and backward passes of every (chunk, micro-batch) in Megatron's order: warm-up
// forwards, then one forward and one backward in turn, then the remaining backwards. With one
// chunk this is plain 1F1B (the 1f1b engine's order).
//
// The transfers are placed by transfer_placement.hpp (the pipeline group is a ring here: the last
// rank feeds chunk c + 1 of rank 0), so the schedule cannot deadlock even with blocking sends.
#pragma once

#include <string>
#include <vector>

#include "pipeline_schedule.hpp"

namespace triax::plugins {

// Why a shape cannot be scheduled, naming the key to change; empty when it can.
std::string schedule_shape_problem(const ScheduleShape& shape);

// Forwards before the first backward on `pp_rank` (Megatron's count, capped at the total).
int warm_up_passes(const ScheduleShape& shape, int pp_rank);

// The passes of `pp_rank`, in order.
std::vector<Pass> interleaved_passes(const ScheduleShape& shape, int pp_rank);

// The most (chunk, micro-batch) pairs whose activations are alive at once on `pp_rank`.
int peak_live_passes(const ScheduleShape& shape, int pp_rank);

// Every rank's steps: its passes in order, with the transfers placed as described above.
std::vector<std::vector<ScheduleStep>> interleaved_schedule(const ScheduleShape& shape);

}  // namespace triax::plugins
