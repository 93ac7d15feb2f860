#include "pipeline_schedule.hpp"

#include <algorithm>

namespace triax::plugins {

ScheduleStep::Kind step_kind_of(PassKind kind) {
  switch (kind) {
    case PassKind::Forward:
      return ScheduleStep::Kind::Forward;
    case PassKind::Backward:
      return ScheduleStep::Kind::Backward;
    case PassKind::BackwardInput:
      return ScheduleStep::Kind::BackwardInput;
    case PassKind::BackwardWeight:
      return ScheduleStep::Kind::BackwardWeight;
  }
  return ScheduleStep::Kind::Forward;
}

int peak_in_flight(const std::vector<Pass>& passes) {
  int live = 0, peak = 0;
  for (const Pass& pass : passes) {
    if (pass.forward()) ++live;
    if (pass.frees_activations()) --live;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace triax::plugins
