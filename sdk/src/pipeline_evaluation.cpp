#include "triax/pipeline_evaluation.hpp"

#include "triax/pipeline_stage.hpp"

namespace triax {

std::vector<at::Tensor> evaluate_pipeline(const EngineContext& context, const StepRequest& request) {
  PipelineStage stage(context, request);
  // Micro-batch by micro-batch, chunk by chunk: every rank meets its transfers in the same order
  // as its peers, a chain from virtual stage 0 to the last, so no send waits on a later receive.
  for (int index = 0; index < request.micro_batches(); ++index)
    for (int chunk = 0; chunk < request.chunk_count(); ++chunk) stage.evaluate(chunk, index);
  return stage.losses();
}

}  // namespace triax
