#include "zero_bubble_schedule.hpp"

#include <algorithm>
#include <stdexcept>

#include "interleaved_schedule.hpp"
#include "transfer_placement.hpp"

namespace triax::plugins {
namespace {

bool equal_times(const PassTimes& t) { return t.forward == t.backward_input && t.forward == t.backward_weight; }

// Orders tried per cap on activations in flight for unequal times: the first two unperturbed
// (without and with the lookahead). Larger schedules take longer to run, so they get fewer tries
// (at least kTrials) out of a budget of passes: the search takes about a second at most.
constexpr int kTrials = 96;
constexpr int kMaxTrials = 480;
constexpr long kPassBudget = 160000;
constexpr int kCaps = 8;

int trials_per_cap(const ScheduleShape& shape) {
  const long passes = 3L * shape.virtual_stages() * shape.micro_batches;
  return static_cast<int>(std::clamp(kPassBudget / passes, static_cast<long>(kTrials), static_cast<long>(kMaxTrials)));
}

Perturbation trial_perturbation(int trial) {
  static const double kForwardFirst[] = {0.0, 0.05, 0.1, 0.2};
  static const double kWeightFirst[] = {0.0, 0.05, 0.1, 0.2, 0.4};
  if (trial < 2) return Perturbation{};
  return Perturbation{static_cast<uint64_t>(trial), kForwardFirst[(trial / 2) % 4], kWeightFirst[(trial / 8) % 5]};
}

struct TimedOrder {
  std::vector<std::vector<Pass>> passes;
  double step = 0.0;
};

// Replaces `best` by every order of the runs at `limit` in flight that the simulator times
// shorter (by more than rounding: on a tie the earlier, of fewer activations, stays).
void try_orders(const ScheduleShape& shape, ZeroBubbleLayout layout, int limit, const PassTimes& times,
                TimedOrder& best) {
  layout.in_flight_limit = limit;
  const int trials = trials_per_cap(shape);
  for (int trial = 0; trial < trials; ++trial) {
    try {
      std::vector<std::vector<Pass>> candidate =
          zero_bubble_run(shape, layout, times, trial % 2 == 1, trial_perturbation(trial));
      const double step = simulate_schedule(shape, layout.placement, candidate, times).step_time;
      if (step < best.step * (1 - 1e-9)) best = {std::move(candidate), step};
    } catch (const std::logic_error&) {
      // a perturbation that stalls the ranks: not a schedule
    }
  }
}

}  // namespace

ZeroBubbleLayout zb_h1_layout(int pp_size) { return {1, TRIAX_CHUNKS_INTERLEAVED, pp_size, true}; }

ZeroBubbleLayout zb_v_layout(int pp_size) { return {2, TRIAX_CHUNKS_V, 2 * pp_size, false}; }

int zero_bubble_in_flight_cap(const ScheduleShape& shape, const ZeroBubbleLayout& layout) {
  // zb_h1 keeps 1F1B's peak; zb_v may hold as many chunk passes as interleaved_1f1b's first rank
  // where interleaved_1f1b runs the shape (a multiple of pp micro-batches).
  if (layout.keeps_1f1b_order || shape.pp_size < 2 || shape.micro_batches % shape.pp_size != 0)
    return layout.in_flight_limit;
  return std::max(layout.in_flight_limit, peak_live_passes(shape, 0));
}

std::string zero_bubble_shape_problem(const std::string& engine, const ScheduleShape& shape) {
  if (shape.pp_size < 1) return "parallelism.pp: must be >= 1, got " + std::to_string(shape.pp_size);
  if (shape.micro_batches < shape.pp_size)
    return "tokens.batch_accumulation_per_replica: " + engine +
           " needs at least parallelism.pp = " + std::to_string(shape.pp_size) +
           " micro-batches per step to fill its pipeline, got " + std::to_string(shape.micro_batches) +
           " (raise it, or use parallelism.pp_engine: afab)";
  return "";
}

std::vector<std::vector<Pass>> zero_bubble_passes(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                                  const PassTimes& times) {
  // The order of equal times; when the times differ, also orders run with them at every cap on
  // activations in flight from the layout's to zero_bubble_in_flight_cap's, with and without the
  // lookahead, plain and perturbed: the one whose simulated step is shortest (the first on a tie).
  std::vector<std::vector<Pass>> equal = zero_bubble_run(shape, layout, PassTimes{}, false);
  if (equal_times(times)) return equal;
  TimedOrder best{std::move(equal), 0.0};
  best.step = simulate_schedule(shape, layout.placement, best.passes, times).step_time;
  // At most kCaps caps, evenly spread, the highest included: deep pipelines stay quick to order.
  const int cap = zero_bubble_in_flight_cap(shape, layout);
  const int spacing = std::max(1, (cap - layout.in_flight_limit + kCaps - 1) / kCaps);
  for (int limit = layout.in_flight_limit; limit < cap; limit += spacing) try_orders(shape, layout, limit, times, best);
  try_orders(shape, layout, cap, times, best);
  return std::move(best.passes);
}

std::vector<std::vector<ScheduleStep>> zero_bubble_schedule(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                                            const std::string& engine, const PassTimes& times) {
  const std::string problem = zero_bubble_shape_problem(engine, shape);
  if (!problem.empty()) throw std::invalid_argument(problem);
  const std::vector<std::vector<Pass>> passes = zero_bubble_passes(shape, layout, times);
  const SimulatedStep timed = simulate_schedule(shape, layout.placement, passes, times);
  return place_transfers_in_time(shape, layout.placement, passes, timed.starts, engine);
}

}  // namespace triax::plugins
