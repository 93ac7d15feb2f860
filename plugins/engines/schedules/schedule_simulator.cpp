#include "schedule_simulator.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "triax/chunk_placement.hpp"

namespace triax::plugins {
namespace {

constexpr double kNotArrived = std::numeric_limits<double>::infinity();

class Timeline {
 public:
  Timeline(const ScheduleShape& shape, triax_chunk_placement placement, const RankPassTimes& times)
      : shape_(shape),
        placement_(placement),
        times_(times),
        forward_end_(shape.virtual_stages(), std::vector<double>(shape.micro_batches, kNotArrived)),
        input_gradient_end_(forward_end_),
        free_at_(shape.pp_size, 0.0),
        busy_(shape.pp_size, 0.0),
        starts_(shape.pp_size) {}

  // Runs `pass` on `rank` if its input's arrival is known; false when it is not yet.
  bool try_run(int rank, const Pass& pass) {
    const int stage = virtual_stage_of(placement_, shape_.pp_size, rank, pass.chunk);
    check(stage, pass.micro_batch);
    double ready = 0.0;
    if (pass.forward() && stage > 0) ready = arrival(forward_end_[stage - 1][pass.micro_batch], stage - 1, rank);
    if (!pass.forward()) ready = forward_end_[stage][pass.micro_batch];
    if (pass.backpropagates_input() && stage < shape_.virtual_stages() - 1)
      ready = std::max(ready, arrival(input_gradient_end_[stage + 1][pass.micro_batch], stage + 1, rank));
    if (pass.kind == PassKind::BackwardWeight) ready = std::max(ready, input_gradient_end_[stage][pass.micro_batch]);
    if (ready == kNotArrived) return false;
    const double duration = times_.duration(rank, pass);
    const double start = std::max(ready, free_at_[rank]), end = start + duration;
    starts_[rank].push_back(start);
    free_at_[rank] = end;
    busy_[rank] += duration;
    if (pass.forward()) forward_end_[stage][pass.micro_batch] = end;
    if (pass.backpropagates_input()) input_gradient_end_[stage][pass.micro_batch] = end;
    return true;
  }

  SimulatedStep result() const { return simulated_step(free_at_, busy_, starts_); }

 private:
  void check(int stage, int micro_batch) const {
    if (micro_batch < 0 || micro_batch >= shape_.micro_batches || stage >= shape_.virtual_stages())
      throw std::logic_error("schedule simulator: a pass of micro-batch " + std::to_string(micro_batch) +
                             " on virtual stage " + std::to_string(stage) + " outside the shape");
  }
  // When a tensor produced at `end` on `from_stage`'s rank is there for `rank`.
  double arrival(double end, int from_stage, int rank) const {
    const bool crosses = holder_of_virtual_stage(placement_, shape_.pp_size, from_stage).pp_rank != rank;
    return crosses ? end + times_.transfer : end;
  }

  ScheduleShape shape_;
  triax_chunk_placement placement_;
  const RankPassTimes& times_;
  std::vector<std::vector<double>> forward_end_, input_gradient_end_;  // per virtual stage and micro-batch
  std::vector<double> free_at_, busy_;                                 // per rank
  std::vector<std::vector<double>> starts_;                            // per rank and pass
};

}  // namespace

SimulatedStep simulated_step(const std::vector<double>& ends, const std::vector<double>& busy,
                             const std::vector<std::vector<double>>& starts) {
  SimulatedStep step;
  step.step_time = *std::max_element(ends.begin(), ends.end());
  step.busy = busy;
  step.starts = starts;
  const double mean_busy = std::accumulate(busy.begin(), busy.end(), 0.0) / static_cast<double>(busy.size());
  step.bubble_fraction = step.step_time > 0 ? 1.0 - mean_busy / step.step_time : 0.0;
  return step;
}

double pass_duration(const PassTimes& times, PassKind kind, int chunks) {
  const double share = 1.0 / chunks;
  switch (kind) {
    case PassKind::Forward:
      return times.forward * share;
    case PassKind::Backward:
      return (times.backward_input + times.backward_weight) * share;
    case PassKind::BackwardInput:
      return times.backward_input * share;
    case PassKind::BackwardWeight:
      return times.backward_weight * share;
  }
  return 0.0;
}

RankPassTimes RankPassTimes::uniform(const PassTimes& times, const ScheduleShape& shape) {
  ChunkPassTimes chunk;
  chunk.forward = pass_duration(times, PassKind::Forward, shape.chunks);
  chunk.backward_input = pass_duration(times, PassKind::BackwardInput, shape.chunks);
  chunk.backward_weight = pass_duration(times, PassKind::BackwardWeight, shape.chunks);
  chunk.backward = pass_duration(times, PassKind::Backward, shape.chunks);
  RankPassTimes uniform;
  uniform.by_rank.assign(shape.pp_size, std::vector<ChunkPassTimes>(shape.chunks, chunk));
  uniform.transfer = times.transfer;
  return uniform;
}

double RankPassTimes::duration(int rank, const Pass& pass) const {
  if (rank < 0 || rank >= static_cast<int>(by_rank.size()) || pass.chunk < 0 ||
      pass.chunk >= static_cast<int>(by_rank[rank].size()))
    throw std::logic_error("schedule simulator: no times for chunk " + std::to_string(pass.chunk) +
                           " of pipeline rank " + std::to_string(rank));
  const ChunkPassTimes& chunk = by_rank[rank][pass.chunk];
  switch (pass.kind) {
    case PassKind::Forward:
      return chunk.forward;
    case PassKind::Backward:
      return chunk.backward;
    case PassKind::BackwardInput:
      return chunk.backward_input;
    case PassKind::BackwardWeight:
      return chunk.backward_weight;
  }
  return 0.0;
}

SimulatedStep simulate_schedule(const ScheduleShape& shape, triax_chunk_placement placement,
                                const std::vector<std::vector<Pass>>& passes, const PassTimes& times) {
  return simulate_schedule(shape, placement, passes, RankPassTimes::uniform(times, shape));
}

SimulatedStep simulate_schedule(const ScheduleShape& shape, triax_chunk_placement placement,
                                const std::vector<std::vector<Pass>>& passes, const RankPassTimes& times) {
  if (static_cast<int>(passes.size()) != shape.pp_size)
    throw std::logic_error("schedule simulator: passes for " + std::to_string(passes.size()) + " ranks, pp is " +
                           std::to_string(shape.pp_size));
  Timeline timeline(shape, placement, times);
  const int stuck =
      run_ranks_in_order(passes, [&](int rank, const Pass& pass) { return timeline.try_run(rank, pass); });
  if (stuck >= 0)
    throw std::logic_error("schedule simulator: the passes of pipeline rank " + std::to_string(stuck) +
                           " cannot all run (a pass waits for one that never comes)");
  SimulatedStep step = timeline.result();
  for (const std::vector<Pass>& rank_passes : passes) step.peak_in_flight.push_back(peak_in_flight(rank_passes));
  return step;
}

}  // namespace triax::plugins
