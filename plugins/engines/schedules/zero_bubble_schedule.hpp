// Zero-bubble pipeline schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024), as
// data. Each backward is split into B, the gradients of the stage's inputs, which the previous
// stage waits for, and W, the gradients of its weights, which nothing waits for: W runs where a
// rank would otherwise wait for its next input, so the bubbles of the warm-up and the drain fill.
//
// The order of every rank's passes comes from running all ranks at once, each pass taking its
// time (zero_bubble_run.hpp): by default equal times for F, B and W; given the times of a stage's
// F, B and W (parallelism.pp_pass_times, measured by `triax inspect schedule --measure`), orders
// run with those times too, plain and perturbed (a ready F now and then before a ready B, a W
// before an F: 96 to 480 tries per cap on activations in flight, the same on every rank), and the
// one the simulator times shortest wins. zb_v may then hold more chunk passes in flight, up to
// interleaved_1f1b's peak (zero_bubble_in_flight_cap), where that shortens the step.
// The transfers are then placed by transfer_placement.hpp in the order of the passes' simulated
// start times, so the schedule cannot deadlock even with blocking sends; where the host's sends
// return at once, the engine moves each send up to just after its pass (place_sends_early).
//
//   zb_h1 (ZB-H1): one chunk per rank, at most pp micro-batches in flight on every rank, the most
//     1F1B holds (on its first rank). With equal F, B and W times the step is 3m + pp - 1 passes
//     long, against 1F1B's 3(m + pp - 1): the bubble shrinks to a third.
//   zb_v (ZB-V): two chunks per rank in a V (TRIAX_CHUNKS_V: rank 0 holds the first and the last
//     virtual stage) and at most 2 pp chunk passes in flight, pp micro-batches' worth of a rank's
//     activations, again 1F1B's most (for given times, up to interleaved_1f1b's). With equal
//     times the only idle time left is the last rank's wait for its first input: pp - 1 chunk
//     passes.
#pragma once

#include <string>
#include <vector>

#include "pipeline_schedule.hpp"
#include "schedule_simulator.hpp"
#include "zero_bubble_run.hpp"

namespace triax::plugins {

ZeroBubbleLayout zb_h1_layout(int pp_size);
ZeroBubbleLayout zb_v_layout(int pp_size);

// The most (chunk, micro-batch) pairs a rank may hold in flight in an order for unequal times:
// the layout's limit for zb_h1 (1F1B's peak); for zb_v interleaved_1f1b's peak at `shape` (its
// first rank's, with the same chunks) where interleaved_1f1b runs the shape, else the layout's.
int zero_bubble_in_flight_cap(const ScheduleShape& shape, const ZeroBubbleLayout& layout);

// Why `engine` cannot schedule `shape` (too few micro-batches to fill its pipeline), naming the
// engine and the key to change; empty when it can.
std::string zero_bubble_shape_problem(const std::string& engine, const ScheduleShape& shape);

// Each rank's passes (Forward, BackwardInput, BackwardWeight), in order, for stage times `times`
// (only their ratios matter).
std::vector<std::vector<Pass>> zero_bubble_passes(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                                  const PassTimes& times = PassTimes{});

// Every rank's steps: its passes with the transfers placed.
std::vector<std::vector<ScheduleStep>> zero_bubble_schedule(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                                            const std::string& engine,
                                                            const PassTimes& times = PassTimes{});

}  // namespace triax::plugins
