// Validation through the pipeline: forward only, without gradients. There is no schedule to
// choose (nothing waits for a backward), so every engine evaluates the same way: each micro-batch
// goes through the virtual stages in order, chunk after chunk. The host runs it for any engine
// plugin, whatever ABI version it was built for.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "triax/engine.hpp"

namespace triax {

// The LM loss (mean over the micro-batch's counted tokens) of every micro-batch of `request`, in
// order, on the rank holding the last virtual stage; empty on the others. The model chunks
// should be in evaluation mode (set_training(false)); no gradient or graph is kept. `placement`:
// where the engine put the chunks (triax_engine_vtable.chunk_placement).
std::vector<at::Tensor> evaluate_pipeline(const EngineContext& context, const StepRequest& request,
                                          triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED);

}  // namespace triax
