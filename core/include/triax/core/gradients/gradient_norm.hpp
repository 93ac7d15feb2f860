// Clipping by the global gradient norm: the L2 norm of the one logical gradient of the whole
// model, however it is spread over ranks. Each rank sums the squares of what it holds, the sum is
// all-reduced, and every element must count exactly once: a rank skips the gradients it holds
// that another rank also counts (copies of tp-replicated and tied parameters).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/parameter.hpp"

namespace triax {

class Communicator;

// Which of this rank's parameters count in the global norm: a tp-replicated parameter
// (TRIAX_PARAM_TP_REPLICATED) on tp rank 0 only; a tied copy (TRIAX_PARAM_TIED) only where
// `counts_tied_copy(tied_key)` is true, which the caller makes true on the lowest pipeline stage
// holding that key; everything else always.
std::vector<bool> parameters_counted_in_norm(const std::vector<NamedParameter>& parameters, int tp_rank,
                                             const std::function<bool(const std::string& tied_key)>& counts_tied_copy);

// The global L2 norm of `gradients` (a 0-dim fp32 tensor, never read back to the host): squares
// summed over the counted gradients, all-reduced over `group`. With `max_norm`, scales every
// gradient in place (counted or not) so the norm becomes at most max_norm. Returns the norm
// before clipping.
at::Tensor clip_by_global_norm(const std::vector<at::Tensor>& gradients, const std::vector<bool>& counted,
                               std::optional<double> max_norm, Communicator& communicator, triax_group group);

}  // namespace triax
