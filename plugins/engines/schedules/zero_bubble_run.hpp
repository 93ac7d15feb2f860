// One order of a zero-bubble schedule's passes, from running all pipeline ranks at once with
// each pass taking its time (a pass through one of `chunks` chunks 1/chunks of a stage's). An F
// runs only while its rank holds fewer than `in_flight_limit` (chunk, micro-batch) pairs
// forwarded and not yet through W. A rank that is free runs
//   with keeps_1f1b_order (zb_h1): its next F or B of 1F1B's order (warm-up forwards, then one F
//     and one B in turn) once its input has arrived;
//   else the next B whose output gradient has arrived (the oldest micro-batch first, then the
//     later virtual stage), else the next F whose input has arrived;
// and when neither can run, its oldest waiting W; else it waits. With `lookahead` it does not
// start a W when the input of its next F or B is known to arrive before that W would end. A
// perturbation sometimes runs a ready F before a ready B, or a waiting W before a ready F, by a
// hash of its seed and the pass: the same on every rank that computes it. Ranks free at the same
// moment decide in rank order. Plain C++.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline_schedule.hpp"
#include "schedule_simulator.hpp"
#include "triax/abi.h"

namespace triax::plugins {

struct ZeroBubbleLayout {
  int chunks = 1;
  triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED;
  int in_flight_limit = 1;        // (chunk, micro-batch) pairs per rank, forwarded and not yet through W
  bool keeps_1f1b_order = false;  // F and B in 1F1B's order (one chunk), else whichever is ready
};

struct Perturbation {
  uint64_t seed = 0;                   // 0: none
  double forward_before_backward = 0;  // the share of ready F run before a ready B
  double weight_before_forward = 0;    // the share of waiting W run before a ready F
};

// Each rank's passes (Forward, BackwardInput, BackwardWeight), in the order the run gave them.
// Throws std::logic_error when the ranks stall (no rank can go on).
std::vector<std::vector<Pass>> zero_bubble_run(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                               const PassTimes& times, bool lookahead,
                                               const Perturbation& perturbation = {});

}  // namespace triax::plugins
