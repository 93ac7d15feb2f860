// FP8 training of the SDK's linear layers (docs/fp8.md).
//
// The config's `fp8` section (triax/fp8_options.hpp) names a scaling recipe and which linears
// compute in fp8. The host hands the section to the model as triax_model_context.fp8_yaml;
// ModelContext::from_c reads it into Fp8Options, and the plugin adapter switches the chosen
// ColumnParallelLinear and RowParallelLinear layers of the freshly built model to fp8
// (convert_linears_to_fp8), so model code stays as it is. Without the section nothing changes:
// the linears keep their plain path.
#pragma once

#include <torch/nn/module.h>

#include "triax/fp8_options.hpp"

namespace triax {

struct ModelContext;

// Switches every column- and row-parallel linear of `model` whose name matches
// context.fp8->linears to fp8 (nothing when context.fp8 is null), and with recipe rowwise every
// module with grouped products (the MoE experts, triax/layers/fp8_grouped_linear.hpp) chosen the
// same way. Refuses, naming the key and the layer, a CUDA device without fp8 tensor cores, a layer
// whose dimensions on this rank are not multiples of 16, and experts named by patterns of the
// config's own under recipe tensorwise.
void convert_linears_to_fp8(torch::nn::Module& model, const ModelContext& context);

// The parameters may have changed (an optimizer step, a checkpoint load): the fp8 weights kept
// across micro-batches (triax/layers/fp8_weight_cache.hpp) are cast again at their next use. The
// trainer calls it before every step (so that each step, also one recorded in a CUDA graph, casts
// its weights at its first micro-batch) and after every optimizer step; code that changes
// parameters in place through another tensor than the parameter itself must call it too.
void fp8_weights_changed();

}  // namespace triax
