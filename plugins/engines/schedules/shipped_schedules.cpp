#include "shipped_schedules.hpp"

#include <stdexcept>

#include "interleaved_schedule.hpp"
#include "zero_bubble_schedule.hpp"

namespace triax::plugins {
namespace {

std::vector<Pass> all_forward_all_backward(int micro_batches) {
  std::vector<Pass> passes;
  for (int i = 0; i < micro_batches; ++i) passes.push_back({PassKind::Forward, 0, i});
  for (int i = 0; i < micro_batches; ++i) passes.push_back({PassKind::Backward, 0, i});
  return passes;
}

EngineSchedule interleaved(const std::string& engine, const ScheduleShape& shape) {
  const std::string problem = schedule_shape_problem(shape);
  if (!problem.empty()) throw std::invalid_argument(problem);
  EngineSchedule schedule{engine, shape, TRIAX_CHUNKS_INTERLEAVED, {}};
  for (int r = 0; r < shape.pp_size; ++r) schedule.passes.push_back(interleaved_passes(shape, r));
  return schedule;
}

EngineSchedule zero_bubble(const std::string& engine, int micro_batches, const ZeroBubbleLayout& layout, int pp_size,
                           const PassTimes& times) {
  const ScheduleShape shape{pp_size, layout.chunks, micro_batches};
  const std::string problem = zero_bubble_shape_problem(engine, shape);
  if (!problem.empty()) throw std::invalid_argument(problem);
  return {engine, shape, layout.placement, zero_bubble_passes(shape, layout, times)};
}

}  // namespace

std::vector<std::string> shipped_schedule_names() { return {"afab", "1f1b", "interleaved_1f1b", "zb_h1", "zb_v"}; }

EngineSchedule shipped_schedule(const std::string& engine, int pp_size, int micro_batches, const PassTimes& times) {
  if (pp_size < 1 || micro_batches < 1)
    throw std::invalid_argument("a schedule needs pp >= 1 and at least one micro-batch, got pp " +
                                std::to_string(pp_size) + " and " + std::to_string(micro_batches));
  if (engine == "afab")
    return {engine,
            {pp_size, 1, micro_batches},
            TRIAX_CHUNKS_INTERLEAVED,
            std::vector<std::vector<Pass>>(pp_size, all_forward_all_backward(micro_batches))};
  if (engine == "1f1b") return interleaved(engine, {pp_size, 1, micro_batches});
  if (engine == "interleaved_1f1b") return interleaved(engine, {pp_size, 2, micro_batches});
  if (engine == "zb_h1") return zero_bubble(engine, micro_batches, zb_h1_layout(pp_size), pp_size, times);
  if (engine == "zb_v") return zero_bubble(engine, micro_batches, zb_v_layout(pp_size), pp_size, times);
  throw std::invalid_argument("no shipped engine is called '" + engine +
                              "' (afab, 1f1b, interleaved_1f1b, zb_h1, zb_v)");
}

}  // namespace triax::plugins
