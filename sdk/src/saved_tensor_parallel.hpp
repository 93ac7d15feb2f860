// A tensor-parallel group kept in a custom autograd function's context for its backward.
#pragma once

#include "triax/layers/tensor_parallel.hpp"

namespace torch::autograd {
struct AutogradContext;
}

namespace triax::detail {

// AutogradContext keeps non-tensor state as IValues: the host table travels as its address.
void save_tensor_parallel(torch::autograd::AutogradContext* ctx, const TensorParallel& tp);
TensorParallel saved_tensor_parallel(torch::autograd::AutogradContext* ctx);

}  // namespace triax::detail
