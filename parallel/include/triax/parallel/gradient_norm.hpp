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

// The global L2 norm of `gradients` and what clipping to `max_norm` multiplies them by. Both are
// 0-dim fp32 tensors, never read back to the host.
struct GlobalNorm {
  at::Tensor norm;         // before clipping
  at::Tensor coefficient;  // min(1, max_norm / (norm + 1e-6)); undefined without max_norm
};

// Squares summed in fp32 over the counted gradients (fp32 or lower precision), all-reduced over
// `group`. Nothing is scaled.
GlobalNorm global_norm(const std::vector<at::Tensor>& gradients, const std::vector<bool>& counted,
                       std::optional<double> max_norm, Communicator& communicator, triax_group group);

// global_norm(), then every gradient (counted or not) scaled in place by its coefficient, so the
// norm becomes at most max_norm. Returns the norm before clipping.
at::Tensor clip_by_global_norm(const std::vector<at::Tensor>& gradients, const std::vector<bool>& counted,
                               std::optional<double> max_norm, Communicator& communicator, triax_group group);

}  // namespace triax
