// Runs one rank's steps of a schedule (pipeline_schedule.hpp) through the SDK's PipelineStage:
// each transfer and pass in the order given. Header only: the schedules library itself stays
// free of LibTorch; the engines that run schedules include this.
#pragma once

#include <vector>

#include "pipeline_schedule.hpp"
#include "transfer_placement.hpp"
#include "triax/engine.hpp"
#include "triax/pipeline_stage.hpp"

namespace triax::plugins {

// This rank's steps of `schedule` (every rank's, its transfers matched one for one): where the
// host's sends return at once, each send moves up to just after the pass that makes its tensor,
// so that no receiver waits for the sender's later passes (place_sends_early).
inline std::vector<ScheduleStep> steps_for_rank(const std::vector<std::vector<ScheduleStep>>& schedule,
                                                const EngineContext& context) {
  if (!context.host_buffers_sends) return schedule.at(static_cast<size_t>(context.pp_rank));
  return place_sends_early(schedule).at(static_cast<size_t>(context.pp_rank));
}

inline void run_steps(PipelineStage& stage, const std::vector<ScheduleStep>& steps) {
  using Kind = ScheduleStep::Kind;
  for (const ScheduleStep& step : steps) {
    switch (step.kind) {
      case Kind::ReceiveInput:
        stage.receive_input(step.chunk, step.micro_batch);
        break;
      case Kind::Forward:
        stage.run_forward(step.chunk, step.micro_batch);
        break;
      case Kind::SendOutput:
        stage.send_output(step.chunk, step.micro_batch);
        break;
      case Kind::ReceiveGradient:
        stage.receive_output_gradient(step.chunk, step.micro_batch);
        break;
      case Kind::Backward:
        stage.run_backward(step.chunk, step.micro_batch);
        break;
      case Kind::BackwardInput:
        stage.run_backward_input(step.chunk, step.micro_batch);
        break;
      case Kind::BackwardWeight:
        stage.run_backward_weight(step.chunk, step.micro_batch);
        break;
      case Kind::SendGradient:
        stage.send_input_gradient(step.chunk, step.micro_batch);
        break;
    }
  }
}

}  // namespace triax::plugins
