// Clipping by the global gradient norm: the L2 norm of the one logical gradient of the whole
// model, however it is spread over ranks. Each rank sums the squares of what it holds, the sum is
// all-reduced, and every element must count exactly once: a rank skips the gradients it holds
// that another rank counts (ReplicaOwnership says which copy counts).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "triax/abi.h"
#include "triax/parameter.hpp"

namespace triax {

class Communicator;

// The global L2 norm of `gradients` (a 0-dim fp32 tensor, never read back to the host): squares
// summed over the counted gradients, all-reduced over `group`. With `max_norm`, scales every
// gradient in place (counted or not) so the norm becomes at most max_norm. Returns the norm
// before clipping.
at::Tensor clip_by_global_norm(const std::vector<at::Tensor>& gradients, const std::vector<bool>& counted,
                               std::optional<double> max_norm, Communicator& communicator, triax_group group);

}  // namespace triax
