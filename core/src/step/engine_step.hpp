// One step's forward and backward: the engine plugin runs the step's micro-batches through the
// model chunks, and each chunk's gradients are handed to StepGradients as its backward ends.
//
// With general.cuda_graphs the first step of the process runs as usual (it initialises cuBLAS,
// cuDNN and the allocator), the second is captured as a CUDA graph and every later one replays
// it: the micro-batches are read from one device buffer that each step's samples are copied into,
// and the accumulation is finished inside the graph, so that the accumulated gradients after a
// replay are the step's, as after an ordinary step.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

#include "gradients/step_gradients.hpp"
#include "triax/report/pass_record.hpp"
#include "step/micro_batch_request.hpp"
#include "step/model_chunks.hpp"
#include "triax/core/plugins/plugin_instances.hpp"

namespace triax {

class CudaStepGraph;

struct EngineStepParts {
  EngineInstance* engine = nullptr;
  ModelChunks* model = nullptr;
  StepGradients* gradients = nullptr;
  std::string model_plugin;  // names for the error of a step that cannot be captured
  MicroBatchPlace place;
  int64_t micro_batches = 0;
  PassRecord* record = nullptr;  // parallelism.pp_pass_record: told of each pass while on
};

class EngineStep {
 public:
  EngineStep(EngineStepParts parts, bool cuda_graphs);
  ~EngineStep();

  // Runs step `step` on this rank's `step_samples` ([micro-batches * micro_batch_size,
  // sequence_length + 1] token ids, any device). The gradients are accumulated afterwards.
  EngineInstance::Result run(int64_t step, const at::Tensor& step_samples);

 private:
  EngineInstance::Result run_engine(int64_t step, const at::Tensor& step_samples);
  EngineInstance::Result capture(int64_t step, const at::Tensor& step_samples);
  static triax_status fold_chunk(void* self, int32_t chunk, int32_t index, triax_error* error);
  static void record_pass(void* self, int32_t kind, int32_t chunk, int32_t index, double seconds);

  EngineStepParts parts_;
  int64_t steps_run_ = 0;  // by this process
  int64_t step_ = 0;       // the step in progress
  std::unique_ptr<CudaStepGraph> graph_;  // with general.cuda_graphs only
  at::Tensor graph_input_;  // the captured step's samples: each later step's are copied here
  EngineInstance::Result graph_result_;
};

}  // namespace triax
