// A block of a ZeRO-3 model (a decoder layer, the embedding, the head) run around its unit's
// gathers (zero3_parameters.hpp), as a custom autograd function:
//   forward:  gathers the unit's parameters (or finishes the gather prefetched while the block
//             before ran), starts the gather of `prefetch` (the next unit), runs the block without
//             autograd, so that no activation keeps the gathered values alive, and frees them;
//   backward: gathers again, starts the gather of the unit whose backward comes next, runs the
//             block again with autograd from the saved inputs and random generators (as
//             recompute.hpp does), backpropagates, frees the parameters and reduce-scatters
//             their gradients into the shards' gradients, which autograd accumulates as for any
//             parameter.
// The price is one more forward per block (as with parallelism.recompute_layer) and, per
// micro-batch, two all-gathers and one reduce-scatter of the block's parameters over dp.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "triax/layers/recompute.hpp"
#include "triax/layers/zero3_parameters.hpp"

namespace triax {

// Undefined outputs of `block` are returned undefined. `prefetch_forward` / `prefetch_backward`
// (may be null): the units whose gathers to start once this one's values are in place.
std::vector<at::Tensor> zero3_run(const std::shared_ptr<Zero3Unit>& unit, const RecomputedBlock& block,
                                  const std::vector<at::Tensor>& inputs,
                                  const std::shared_ptr<Zero3Unit>& prefetch_forward = nullptr,
                                  const std::shared_ptr<Zero3Unit>& prefetch_backward = nullptr);

}  // namespace triax
