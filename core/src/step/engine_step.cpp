#include "step/engine_step.hpp"

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdio>
#include <sstream>

#include "step/cuda_step_graph.hpp"
#include "faults/fault_injection.hpp"
#include "triax/core/log.hpp"
#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {
namespace {

// The fault points of a micro-batch's forward (injected by tests: fault_injection.hpp).
void forward_faults(int rank, int64_t step) {
  fault::kill_if_armed("forward", rank, step);
  if (fault::armed("error", rank, step)) throw Error("TRIAX_FAULT: an injected error at step " + std::to_string(step));
}

// Feeds the engine the micro-batches of one step: consecutive rows of this rank's step samples.
struct MicroBatchFeed {
  // [micro-batches * micro_batch_size, sequence_length + 1] tokens, or with document positions
  // [micro-batches * micro_batch_size, 2, sequence_length + 1] (TrainingData::step_samples).
  at::Tensor step_samples;
  int64_t micro_batch_size = 0;
  c10::Device device = c10::Device(c10::kCPU);
  int rank = 0;
  int64_t step = 0;

  static triax_status next(void* self, int32_t index, triax_stage_io* io, triax_error* error) {
    auto* feed = static_cast<MicroBatchFeed*>(self);
    try {
      forward_faults(feed->rank, feed->step);  // the engine asks for a micro-batch to run forward
      at::Tensor rows = feed->step_samples.narrow(0, index * feed->micro_batch_size, feed->micro_batch_size);
      if (rows.device() != feed->device) rows = rows.to(feed->device, /*non_blocking=*/true);
      const bool documents = rows.dim() == 3;
      const at::Tensor tokens = documents ? rows.select(1, 0) : rows;
      int64_t length = tokens.size(1) - 1;
      io->input_ids = release_handle(tokens.narrow(1, 0, length));
      io->label_ids = release_handle(tokens.narrow(1, 1, length));
      io->label_mask = nullptr;
      if (documents) pass_document_positions(rows.select(1, 1), length, io);
      return TRIAX_OK;
    } catch (const std::exception& e) {
      std::snprintf(error->message, TRIAX_ERROR_MESSAGE_CAPACITY, "data: %s", e.what());
      return TRIAX_ERROR_RUNTIME;
    }
  }

  // As nanotron's collator: the inputs' positions, and no loss on the label that starts the next
  // document (the prediction made from a document's last token).
  static void pass_document_positions(const at::Tensor& positions, int64_t length, triax_stage_io* io) {
    if (io->struct_size < offsetof(triax_stage_io, position_ids) + sizeof(io->position_ids))
      throw Error(
          "model.model_config._use_doc_masking needs an engine plugin built against ABI 1.9 or later (it passes "
          "position_ids to every pipeline stage); this one's micro-batches have no room for them");
    io->position_ids = release_handle(positions.narrow(1, 0, length));
    io->label_mask = release_handle(positions.narrow(1, 1, length).ne(0).to(at::kFloat));
  }
};

std::string gibibytes(int64_t bytes) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << static_cast<double>(bytes) / double(1LL << 30) << " GiB";
  return out.str();
}

}  // namespace

EngineStep::EngineStep(EngineStepParts parts, bool cuda_graphs) : parts_(std::move(parts)) {
  if (!cuda_graphs) return;
  if (!parts_.device.is_cuda())
    throw ConfigError("general.cuda_graphs: CUDA graphs need a CUDA device, and this run is on " +
                      parts_.device.str() + " (general.device: auto found no GPU)");
  graph_ = std::make_unique<CudaStepGraph>(parts_.device);  // refused by a build without CUDA
}

EngineStep::~EngineStep() = default;

// After each micro-batch's backward through one chunk: fold that chunk's gradients.
triax_status EngineStep::fold_chunk(void* self, int32_t chunk, int32_t, triax_error* error) {
  try {
    auto& step = *static_cast<EngineStep*>(self);
    fault::kill_if_armed("backward", step.parts_.rank, step.step_);
    const auto [first, end] = step.parts_.model->parameter_range(chunk);
    step.parts_.gradients->after_backward(chunk, first, end);
    return TRIAX_OK;
  } catch (const std::exception& e) {
    std::snprintf(error->message, TRIAX_ERROR_MESSAGE_CAPACITY, "gradient accumulation: %s", e.what());
    return TRIAX_ERROR_RUNTIME;
  }
}

EngineInstance::Result EngineStep::run_engine(int64_t step, const at::Tensor& step_samples) {
  MicroBatchFeed feed;
  feed.step_samples = step_samples;
  feed.micro_batch_size = parts_.micro_batch_size;
  feed.device = parts_.device;
  feed.rank = parts_.rank;
  feed.step = step;

  parts_.gradients->begin_step();
  triax_step_request request{};
  request.struct_size = sizeof(request);
  request.model = parts_.model->refs().front();
  request.model_count = parts_.model->chunk_count();
  request.models = parts_.model->refs().data();
  request.micro_batches = static_cast<int32_t>(parts_.micro_batches);
  request.batches = {&feed, &MicroBatchFeed::next};
  request.hooks_self = this;
  request.after_chunk_backward = fold_chunk;
  request.after_backward = [](void* self, int32_t index, triax_error* error) {
    return fold_chunk(self, 0, index, error);
  };
  return parts_.engine->train_step(request);
}

EngineInstance::Result EngineStep::capture(int64_t step, const at::Tensor& step_samples) {
  graph_input_ = step_samples.to(parts_.device);
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
  forward_faults(parts_.rank, step);
  fault::kill_if_armed("backward", parts_.rank, step);
  if (step_samples.sizes() != graph_input_.sizes())
    throw Error("general.cuda_graphs: step " + std::to_string(step) + "'s samples have another shape than the " +
                "captured step's; a graph replays one shape");
  graph_input_.copy_(step_samples, /*non_blocking=*/true);
  graph_->replay();
  return graph_result_;
}

}  // namespace triax
