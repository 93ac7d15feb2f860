// The model's side of deferred weight gradients (ABI 1.13): zero-bubble pipeline schedules split
// each backward into B, the gradients of a stage's inputs, which the previous stage waits for,
// and W, the gradients of its weights, which nothing waits for. When the engine passes a queue
// with a micro-batch (triax_stage_io.weight_gradients), the plugin adapter keeps a
// WeightGradientDeferral alive for the model's forward, and the SDK's linear layers (column- and
// row-parallel, overlapped with their collectives or not, fp8) record their products so that
// their backward computes only the input's gradient and queues the weight's: the engine runs
// the queue later, and each product then accumulates into its weights through the graph that
// led there (a view of the weight, a gather of ZeRO-3 shards), so gradient hooks, accumulation
// and the data-parallel overlap see it as from a backward. Everything else (norms, embeddings,
// biases, the fused head) finishes in B. Without a queue nothing changes: the same operations
// run as before.
//
// Recomputed blocks (triax/layers/recompute.hpp) keep the forward's queue and defer again when
// they run in backward; ZeRO-3 blocks (triax/layers/zero3_layer.hpp) compute every gradient in
// B, where their reduce-scatter needs them.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

#include "triax/abi.h"

namespace triax {

// While alive, the SDK's linear layers run on this thread defer their weight-gradient products
// into `queue`; nullptr turns deferral off (inside an outer deferral too).
class WeightGradientDeferral {
 public:
  explicit WeightGradientDeferral(const triax_weight_gradient_queue* queue);
  ~WeightGradientDeferral();
  WeightGradientDeferral(const WeightGradientDeferral&) = delete;
  WeightGradientDeferral& operator=(const WeightGradientDeferral&) = delete;

  // The queue of the innermost deferral alive on this thread, or nullptr.
  static const triax_weight_gradient_queue* current();

 private:
  const triax_weight_gradient_queue* previous_;
};

// The queue a product of `input` and `matrix` defers its weight gradient into: the current one
// when autograd records and both need gradients; else nullptr (the backward computes it).
const triax_weight_gradient_queue* weight_gradient_queue_for(const at::Tensor& input, const at::Tensor& matrix);

// Hands `product` to `queue` as deferred work, run at most once by the queue's holder (W).
void defer_weight_gradient(const triax_weight_gradient_queue& queue, std::function<void()> product);

// The gradient of a linear layer's matrix [out, in] from the output's gradient [rows, out] and
// the input [rows, in], in the form autograd's backward of at::linear computes it (so the same
// bits): grad_rowsᵀ input_rows, or for a matrix stored transposed ([in, out] in memory, given
// as its transpose) the transpose of input_rowsᵀ grad_rows.
at::Tensor linear_weight_gradient(const at::Tensor& grad_rows, const at::Tensor& input_rows, const at::Tensor& matrix);

// Accumulates `gradient` into the parameters `matrix` was computed from, through its graph (a
// view of a weight, a gather of shards), as a backward would: their gradient hooks run.
void accumulate_weight_gradient(const at::Tensor& matrix, const at::Tensor& gradient);

// at::linear(x, matrix, bias), its weight gradient deferred when weight_gradient_queue_for(x,
// matrix) gives a queue (the bias's gradient is computed in the backward).
at::Tensor deferrable_linear(const at::Tensor& x, const at::Tensor& matrix, const at::Tensor& bias = at::Tensor());

}  // namespace triax
