#include "step/engine_step.hpp"

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdio>
#include <sstream>

#include "step/micro_batch_request.hpp"
#include "triax/report/log.hpp"
#include "triax/cuda_step_graph.hpp"
#include "triax/error.hpp"
#include "triax/faults/fault_injection.hpp"

namespace triax {
namespace {

std::string gibibytes(int64_t bytes) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << static_cast<double>(bytes) / double(1LL << 30) << " GiB";
  return out.str();
}

}  // namespace

EngineStep::EngineStep(EngineStepParts parts, bool cuda_graphs) : parts_(std::move(parts)) {
  if (!cuda_graphs) return;
  if (!parts_.place.device.is_cuda())
    throw ConfigError("general.cuda_graphs: CUDA graphs need a CUDA device, and this run is on " +
                      parts_.place.device.str() + " (general.device: auto found no GPU)");
  graph_ = std::make_unique<CudaStepGraph>(parts_.place.device);  // refused by a build without CUDA
}

EngineStep::~EngineStep() = default;

// After each micro-batch's backward through one chunk: fold that chunk's gradients.
triax_status EngineStep::fold_chunk(void* self, int32_t chunk, int32_t, triax_error* error) {
  try {
    auto& step = *static_cast<EngineStep*>(self);
    fault::kill_if_armed("backward", step.parts_.place.rank, step.step_);
    step.parts_.model->fold_tied_copies(chunk);
    const auto [first, end] = step.parts_.model->parameter_range(chunk);
    step.parts_.gradients->after_backward(chunk, first, end);
    return TRIAX_OK;
  } catch (const std::exception& e) {
    std::snprintf(error->message, TRIAX_ERROR_MESSAGE_CAPACITY, "gradient accumulation: %s", e.what());
    return TRIAX_ERROR_RUNTIME;
  }
}

void EngineStep::record_pass(void* self, int32_t kind, int32_t chunk, int32_t index, double seconds) {
  static_cast<EngineStep*>(self)->parts_.record->pass_timed(static_cast<triax_pass_kind>(kind), chunk, index, seconds);
}

EngineInstance::Result EngineStep::run_engine(int64_t step, const at::Tensor& step_samples) {
  MicroBatchRequest batches(parts_.place, *parts_.model, step_samples, step, parts_.micro_batches);
  parts_.gradients->begin_step();
  triax_step_request& request = batches.request();
  request.hooks_self = this;
  request.after_chunk_backward = fold_chunk;
  request.after_backward = [](void* self, int32_t index, triax_error* error) {
    return fold_chunk(self, 0, index, error);
  };
  if (parts_.record != nullptr && parts_.record->on()) request.pass_timed = record_pass;
  return parts_.engine->train_step(request);
}

EngineInstance::Result EngineStep::capture(int64_t step, const at::Tensor& step_samples) {
  graph_input_ = step_samples.to(parts_.place.device);
  try {
    graph_->capture([&] {
      graph_result_ = run_engine(step, graph_input_);
      parts_.gradients->finish_accumulation();
    });
  } catch (const std::exception& e) {
    throw Error("general.cuda_graphs: step " + std::to_string(step) +
                " could not be captured as a CUDA graph: the model plugin '" + parts_.model_plugin +
                "' or the engine plugin '" + parts_.engine->name() +
                "' does work a graph cannot hold (a host synchronisation, a shape or a choice that depends on "
                "the data); set general.cuda_graphs to false. The error: " +
                e.what());
  }
  const int64_t count = parts_.micro_batches;
  log::info("CUDA graph: step " + std::to_string(step) + "'s forward and backward captured (" + std::to_string(count) +
            (count == 1 ? " micro-batch" : " micro-batches") + "); later steps replay it. Its memory pool holds " +
            gibibytes(graph_->pool_bytes()) + " of the " + gibibytes(graph_->reserved_bytes()) +
            " the allocator reserves");
  return graph_result_;
}

EngineInstance::Result EngineStep::run(int64_t step, const at::Tensor& step_samples) {
  step_ = step;
  const int64_t run_index = steps_run_++;
  if (!graph_ || run_index == 0) return run_engine(step, step_samples);
  if (!graph_->captured()) return capture(step, step_samples);
  // The host code of the captured step does not run again: its fault points are checked here.
  MicroBatchFeed::forward_faults(parts_.place.rank, step);
  fault::kill_if_armed("backward", parts_.place.rank, step);
  if (step_samples.sizes() != graph_input_.sizes())
    throw Error("general.cuda_graphs: step " + std::to_string(step) + "'s samples have another shape than the " +
                "captured step's; a graph replays one shape");
  graph_input_.copy_(step_samples, /*non_blocking=*/true);
  graph_->replay();
  return graph_result_;
}

}  // namespace triax
