// Times a schedule from the durations of its passes: every rank runs its passes in their order,
// each as soon as the rank is free and the pass's input has arrived (an activation from the
// previous virtual stage, a gradient from the next one, a transfer time later when it crosses
// ranks). A whole Backward takes B + W, and its input gradient leaves when it ends.
//
// What it predicts is the schedule's own shape: the step time, the share of it each rank idles
// (the bubble) and the most (chunk, micro-batch) pairs each rank holds activations of. It knows
// nothing of optimizers, data loading or collectives outside the pipeline.
#pragma once

#include <vector>

#include "pipeline_schedule.hpp"
#include "triax/abi.h"

namespace triax::plugins {

// Durations for one micro-batch through one rank's whole share of the model: a pass through one
// of `chunks` chunks takes 1/chunks of it.
struct PassTimes {
  double forward = 1.0;
  double backward_input = 1.0;   // B
  double backward_weight = 1.0;  // W
  double transfer = 0.0;         // one activation or gradient from a rank to another
};

// The durations of one pass of each kind through one chunk of one rank.
struct ChunkPassTimes {
  double forward = 0.0;
  double backward_input = 0.0;   // B
  double backward_weight = 0.0;  // W
  double backward = 0.0;         // the whole backward (B + W, unless measured unsplit)
};

// The durations per pipeline rank and model chunk, as a run measured them (`triax inspect
// schedule --record`), and the transfer time between ranks.
struct RankPassTimes {
  std::vector<std::vector<ChunkPassTimes>> by_rank;  // [pipeline rank][chunk]
  double transfer = 0.0;

  // Every rank's chunks alike: a pass through one of shape.chunks takes 1/chunks of `times`.
  static RankPassTimes uniform(const PassTimes& times, const ScheduleShape& shape);
  // How long `pass` takes on `rank`; std::logic_error outside the table.
  double duration(int rank, const Pass& pass) const;
};

struct SimulatedStep {
  double step_time = 0.0;                   // until the last pass of any rank ends
  double bubble_fraction = 0.0;             // mean over ranks of the step's idle share
  std::vector<double> busy;                 // per rank: the time its passes take
  std::vector<int> peak_in_flight;          // per rank: (chunk, micro-batch) pairs alive at once
  std::vector<std::vector<double>> starts;  // per rank and pass: when it starts
};

// The step of ranks whose last passes ended at `ends` (per rank), busy `busy` with passes that
// started at `starts`: its time, bubble, busy times and starts (peak_in_flight left to the caller).
SimulatedStep simulated_step(const std::vector<double>& ends, const std::vector<double>& busy,
                             const std::vector<std::vector<double>>& starts);

// How long `kind` takes through one of `chunks` chunks.
double pass_duration(const PassTimes& times, PassKind kind, int chunks);

// `passes`: each rank's, in order. Throws std::logic_error when a pass waits for one that never
// comes (an order no run could follow).
SimulatedStep simulate_schedule(const ScheduleShape& shape, triax_chunk_placement placement,
                                const std::vector<std::vector<Pass>>& passes, const PassTimes& times);
// The same with each rank's and chunk's own durations.
SimulatedStep simulate_schedule(const ScheduleShape& shape, triax_chunk_placement placement,
                                const std::vector<std::vector<Pass>>& passes, const RankPassTimes& times);

}  // namespace triax::plugins
