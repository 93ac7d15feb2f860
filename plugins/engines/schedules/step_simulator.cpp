#include "step_simulator.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>
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
    SimulatedStep step;
    step.step_time = *std::max_element(clock_.begin(), clock_.end());
    step.busy = busy_;
    step.starts = starts_;
    const double busy = std::accumulate(busy_.begin(), busy_.end(), 0.0) / static_cast<double>(busy_.size());
    step.bubble_fraction = step.step_time > 0 ? 1.0 - busy / step.step_time : 0.0;
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
  std::vector<size_t> next(steps.size(), 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (size_t r = 0; r < steps.size(); ++r)
      for (; next[r] < steps[r].size() && timeline.try_run(static_cast<int>(r), steps[r][next[r]]); ++next[r])
        progressed = true;
  }
  for (size_t r = 0; r < steps.size(); ++r)
    if (next[r] != steps[r].size())
      throw std::logic_error("step simulator: pipeline rank " + std::to_string(r) + " waits at step " +
                             std::to_string(next[r]) + " for a tensor that is never sent (the steps deadlock)");
  return timeline.result();
}

}  // namespace triax::plugins
