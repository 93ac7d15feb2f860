// Activation recomputation (gradient checkpointing): run a block of a model (a decoder layer)
// without keeping the tensors its backward needs, and run it again during backward.
//
// recompute(block, inputs, parameters) calls block(inputs) with autograd off, so the block's
// intermediate activations are freed as soon as the forward is done; it keeps only `inputs`
// (and the random generators' states). When the backward reaches the block, it runs block(inputs)
// again with autograd on, from the saved inputs and generator states, and backpropagates the
// outputs' gradients into the inputs and the parameters. The parameters' gradients then
// accumulate as usual (their gradient hooks run once, after the block's backward).
//
// Tensor-parallel collectives inside the block (the SDK's parallel layers) run again in
// backward: first the forward's collectives in forward order, then their adjoints. Every rank of
// a group holds the same blocks and backpropagates them in the same order, so the collectives
// match across ranks as they do without recomputation.
//
// The block must compute the same values when run again from the same inputs and generator
// states (no reading of state that changes between forward and backward), and must stay callable
// until the backward has run (capturing the module that owns it is enough: a model outlives the
// graphs of its micro-batches).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace triax {

// A block's forward over its tensor inputs, in the order they are given to recompute().
using RecomputedBlock = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& inputs)>;

// `parameters`: every tensor the block reads besides its inputs that needs a gradient (the
// block's weights, e.g. module.parameters()). Inputs that do not need gradients (rotary tables,
// masks, integer ids) are given as inputs too: they are saved and passed again. Outputs that are
// not floating point are returned as non-differentiable.
std::vector<at::Tensor> recompute(const RecomputedBlock& block, const std::vector<at::Tensor>& inputs,
                                  const std::vector<at::Tensor>& parameters);

// The same for a block with one output.
at::Tensor recompute(const std::function<at::Tensor(const std::vector<at::Tensor>& inputs)>& block,
                     const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& parameters);

}  // namespace triax
