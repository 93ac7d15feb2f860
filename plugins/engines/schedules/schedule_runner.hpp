// Runs one rank's steps of a schedule (pipeline_schedule.hpp) through the SDK's PipelineStage:
// each transfer and pass in the order given. Header only: the schedules library itself stays
// free of LibTorch; the engines that run schedules include this.
#pragma once

#include <vector>

#include "pipeline_schedule.hpp"
#include "triax/pipeline_stage.hpp"

namespace triax::plugins {

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
