// A weight whose gradient a custom autograd function defers (triax/layers/deferred_weight_gradients.hpp):
// the queue of the forward that read it and the matrix as the layer computed it, whose graph
// leads the gradient to the parameters. The function itself receives the matrix detached, so
// its backward has no edge to the weights and B leaves them alone.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

#include "triax/abi.h"

namespace torch::autograd {
struct AutogradContext;
}

namespace triax::detail {

struct DeferredWeight {
  triax_weight_gradient_queue queue{};  // a copy: the engine's queue outlives the backward
  at::Tensor matrix;                    // as given (saved for the backward only when deferred)

  // Deferred when the current queue takes a product of `input` and `matrix`; else inactive.
  static DeferredWeight of(const at::Tensor& input, const at::Tensor& matrix);
  bool active() const { return queue.defer != nullptr; }
  // What the function should receive: the matrix detached when deferred, else the matrix.
  at::Tensor operand() const { return active() ? matrix.detach() : matrix; }

  // Queues `gradient`, called in W, whose result accumulates into the weights.
  void defer(std::function<at::Tensor()> gradient) const;

  // Kept in and read back from a custom function's context for its backward.
  void save(torch::autograd::AutogradContext* ctx) const;
  static DeferredWeight saved(torch::autograd::AutogradContext* ctx);
};

}  // namespace triax::detail
