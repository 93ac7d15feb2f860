// Zero-bubble pipeline schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024), as
// data. Each backward is split into B, the gradients of the stage's inputs, which the previous
// stage waits for, and W, the gradients of its weights, which nothing waits for: W runs where a
// rank would otherwise wait for its next input, so the bubbles of the warm-up and the drain fill.
//
// The order of every rank's passes comes from running all ranks at once with each pass taking
// one unit of time. An F runs only while the rank holds fewer than `in_flight_limit` (chunk,
// micro-batch) pairs forwarded and not yet through W. A rank free at time t runs
//   zb_h1: the next F or B of 1F1B's order (warm-up forwards, then one F and one B in turn) once
//     its input has arrived; else the oldest W waiting; else it waits.
//   zb_v: the next B whose output gradient has arrived (the oldest micro-batch first), else the
//     next F whose input has arrived, else the oldest W waiting; else it waits.
// The transfers are then placed by transfer_placement.hpp, so the schedule cannot deadlock even
// with blocking sends.
//
//   zb_h1 (ZB-H1): one chunk per rank, at most pp micro-batches in flight on every rank, the most
//     1F1B holds (on its first rank). With equal F, B and W times the step is 3m + pp - 1 passes
//     long, against 1F1B's 3(m + pp - 1): the bubble shrinks to a third.
//   zb_v (ZB-V): two chunks per rank in a V (TRIAX_CHUNKS_V: rank 0 holds the first and the last
//     virtual stage) and at most 2 pp chunk passes in flight, pp micro-batches' worth of a rank's
//     activations, again 1F1B's most. With equal times the only idle time left is the last rank's
//     wait for its first input: pp - 1 chunk passes.
#pragma once

#include <string>
#include <vector>

#include "pipeline_schedule.hpp"
#include "triax/abi.h"

namespace triax::plugins {

struct ZeroBubbleLayout {
  int chunks = 1;
  triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED;
  int in_flight_limit = 1;        // (chunk, micro-batch) pairs per rank, forwarded and not yet through W
  bool keeps_1f1b_order = false;  // F and B in 1F1B's order (one chunk), else whichever is ready
};

ZeroBubbleLayout zb_h1_layout(int pp_size);
ZeroBubbleLayout zb_v_layout(int pp_size);

// Why `engine` cannot schedule `shape` (too few micro-batches to fill its pipeline), naming the
// engine and the key to change; empty when it can.
std::string zero_bubble_shape_problem(const std::string& engine, const ScheduleShape& shape);

// Each rank's passes (Forward, BackwardInput, BackwardWeight), in order.
std::vector<std::vector<Pass>> zero_bubble_passes(const ScheduleShape& shape, const ZeroBubbleLayout& layout);

// Every rank's steps: its passes with the transfers placed.
std::vector<std::vector<ScheduleStep>> zero_bubble_schedule(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                                            const std::string& engine);

}  // namespace triax::plugins
