#include "step_simulator.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace triax::plugins {
namespace {

std::optional<PassKind> pass_kind_of(ScheduleStep::Kind kind) {
  using Kind = ScheduleStep::Kind;
  switch (kind) {
    case Kind::Forward:
      return PassKind::Forward;
    case Kind::Backward:
      return PassKind::Backward;
    case Kind::BackwardInput:
      return PassKind::BackwardInput;
    case Kind::BackwardWeight:
      return PassKind::BackwardWeight;
    default:
      return std::nullopt;
  }
}

class StepTimeline {
 public:
  StepTimeline(size_t ranks, const RankPassTimes& times)
      : times_(times), clock_(ranks, 0.0), busy_(ranks, 0.0), starts_(ranks), passes_(ranks) {}

  // Runs `step` on `rank`; false when it is a receive whose tensor was not sent yet.
  bool try_run(int rank, const ScheduleStep& step) {
    double& now = clock_[rank];
    if (step.is_send()) {
      in_transit_[{rank, step.peer}].push_back(now + (step.peer == rank ? 0.0 : times_.transfer));
      return true;
    }
    if (step.is_receive()) {
      std::deque<double>& queue = in_transit_[{step.peer, rank}];
      if (queue.empty()) return false;
      now = std::max(now, queue.front());
      queue.pop_front();
      return true;
    }
    const Pass pass{*pass_kind_of(step.kind), step.chunk, step.micro_batch};
    const double duration = times_.duration(rank, pass);
    starts_[rank].push_back(now);
    passes_[rank].push_back(pass);
    now += duration;
    busy_[rank] += duration;
    return true;
  }

  SimulatedStep result() const {
    SimulatedStep step = simulated_step(clock_, busy_, starts_);
    for (const std::vector<Pass>& passes : passes_) step.peak_in_flight.push_back(peak_in_flight(passes));
    return step;
  }

 private:
  const RankPassTimes& times_;
  std::vector<double> clock_, busy_;  // per rank: where it is, how long its passes took
  std::vector<std::vector<double>> starts_;
  std::vector<std::vector<Pass>> passes_;
  std::map<std::pair<int, int>, std::deque<double>> in_transit_;  // (sender, receiver): arrival times, in order
};

}  // namespace

SimulatedStep simulate_steps(const std::vector<std::vector<ScheduleStep>>& steps, const RankPassTimes& times) {
  StepTimeline timeline(steps.size(), times);
  const int stuck =
      run_ranks_in_order(steps, [&](int rank, const ScheduleStep& step) { return timeline.try_run(rank, step); });
  if (stuck >= 0)
    throw std::logic_error("step simulator: pipeline rank " + std::to_string(stuck) +
                           " waits for a tensor that is never sent (the steps deadlock)");
  return timeline.result();
}

}  // namespace triax::plugins
