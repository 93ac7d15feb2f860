// Differentiable all-to-all with variable splits over a group of the mesh (the expert-parallel
// group of a mixture of experts: tokens dispatched to the ranks holding their experts, and the
// experts' outputs combined back).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "triax/abi.h"
#include "triax/host.hpp"

namespace triax {

// Forward: rows [sum(input_splits[0..j)), +input_splits[j]) of x go to rank j of `group`; the
// result holds output_splits[j] rows from each rank j, in rank order ([sum(output_splits),
// ...rest of x's shape]). Backward: the gradient travels the other way, the same exchange with
// the splits swapped. Any split may be 0. With a group of one, x is returned unchanged.
at::Tensor all_to_all_v(const at::Tensor& x, const std::vector<int64_t>& output_splits,
                        const std::vector<int64_t>& input_splits, triax_group group, const Host& host);

// How many rows this rank receives from each rank of `group` when it sends input_splits[j] rows
// to rank j: every rank's counts exchanged through an all-to-all of one int64 each. Collective.
std::vector<int64_t> exchange_split_sizes(const std::vector<int64_t>& input_splits, triax_group group,
                                          const Host& host, const c10::Device& device);

}  // namespace triax
