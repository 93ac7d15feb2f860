#include "zero_bubble_schedule.hpp"

#include <stdexcept>

#include "transfer_placement.hpp"

namespace triax::plugins {
namespace {

bool equal_times(const PassTimes& t) { return t.forward == t.backward_input && t.forward == t.backward_weight; }

// Orders tried for unequal times: the first two unperturbed (without and with the lookahead).
constexpr int kTrials = 96;

Perturbation trial_perturbation(int trial) {
  static const double kForwardFirst[] = {0.0, 0.05, 0.1, 0.2};
  static const double kWeightFirst[] = {0.0, 0.05, 0.1, 0.2, 0.4};
  if (trial < 2) return Perturbation{};
  return Perturbation{static_cast<uint64_t>(trial), kForwardFirst[(trial / 2) % 4], kWeightFirst[(trial / 8) % 5]};
}

}  // namespace

ZeroBubbleLayout zb_h1_layout(int pp_size) { return {1, TRIAX_CHUNKS_INTERLEAVED, pp_size, true}; }

ZeroBubbleLayout zb_v_layout(int pp_size) { return {2, TRIAX_CHUNKS_V, 2 * pp_size, false}; }

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
  // The order of equal times; when the times differ, also orders run with them, with and without
  // the lookahead, plain and perturbed: the one whose simulated step is shortest (the first on a
  // tie). Every candidate holds the layout's bound on activations in flight.
  std::vector<std::vector<Pass>> best = zero_bubble_run(shape, layout, PassTimes{}, false);
  if (equal_times(times)) return best;
  double best_step = simulate_schedule(shape, layout.placement, best, times).step_time;
  for (int trial = 0; trial < kTrials; ++trial) {
    const Perturbation perturbation = trial_perturbation(trial);
    try {
      std::vector<std::vector<Pass>> candidate = zero_bubble_run(shape, layout, times, trial % 2 == 1, perturbation);
      const double step = simulate_schedule(shape, layout.placement, candidate, times).step_time;
      if (step < best_step * (1 - 1e-9)) best = std::move(candidate), best_step = step;
    } catch (const std::logic_error&) {
      // a perturbation that stalls the ranks: not a schedule
    }
  }
  return best;
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
