#include "triax/pipeline_evaluation.hpp"

#include "triax/pipeline_stage.hpp"

namespace triax {

std::vector<at::Tensor> evaluate_pipeline(const EngineContext& context, const StepRequest& request,
                                          triax_chunk_placement placement) {
  PipelineStage stage(context, request, {placement, false});
  // Micro-batch by micro-batch, chunk by chunk: every rank meets its transfers in the same order
  // as its peers, a chain from virtual stage 0 to the last, so no send waits on a later receive
  // (a chunk's virtual stage is later than those of the rank's chunks before it, whatever the placement).
  for (int index = 0; index < request.micro_batches(); ++index)
    for (int chunk = 0; chunk < request.chunk_count(); ++chunk) stage.evaluate(chunk, index);
  return stage.losses();
}

}  // namespace triax
