// What one pipeline rank does with one micro-batch, for engine plugins: receive the previous
// stage's activations, run this rank's blocks, send the result on; in backward, receive the
// gradient of what was sent, backpropagate, send the gradient of what was received. An engine
// is then only a schedule: the order in which it calls forward() and backward().
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <vector>

#include "triax/aux_losses.hpp"
#include "triax/engine.hpp"

namespace triax {

// A tensor that lives on another pipeline rank (nanotron's TensorPointer): a stage's input on
// every stage but the first, and its output on every stage but the last.
struct TensorPointer {
  int pp_rank = -1;  // rank within the pipeline group; -1: no such tensor
  bool valid() const { return pp_rank >= 0; }
};

// Point-to-point transfers of activations and their gradients over the pipeline group.
// Activations travel with a small header (dtype and shape), so the receiver needs no
// knowledge of the sender's shapes; a gradient has the shape of the activation it belongs to.
class PipelineChannel {
 public:
  explicit PipelineChannel(Host host) : host_(host) {}
  void send_activation(const at::Tensor& activation, TensorPointer to) const;
  at::Tensor receive_activation(TensorPointer from, c10::Device device) const;
  void send_gradient(const at::Tensor& gradient, TensorPointer to) const;
  // Fills a gradient shaped like `activation`.
  at::Tensor receive_gradient(const at::Tensor& activation, TensorPointer from) const;

 private:
  Host host_;
};

class PipelineStage {
 public:
  PipelineStage(const EngineContext& context, const StepRequest& request);

  bool is_first() const { return !previous_.valid(); }
  bool is_last() const { return !next_.valid(); }

  // Forward of micro-batch `index`; keeps its graph alive until backward(index).
  void forward(int index);
  // Backward of micro-batch `index` (forwarded before), then the host's after_backward hook.
  void backward(int index);

  // Micro-batches forwarded but not yet backpropagated, now and at most so far: measured
  // from the graphs this stage holds.
  int live_micro_batches() const { return static_cast<int>(live_.size()); }
  int peak_live_micro_batches() const { return peak_live_; }

  // The step's result once every micro-batch went both ways: the mean LM loss on the last
  // stage, the mean auxiliary loss of this stage's blocks where they have one.
  StepResult finish();

 private:
  struct InFlight {
    at::Tensor hidden_in;   // received activation (requires grad), not on the first stage
    at::Tensor hidden_out;  // sent activation, not on the last stage
    at::Tensor objective;   // (loss on the last stage + aux loss) / micro-batch count, or undefined
  };

  const StepRequest& request_;
  c10::Device device_;
  PipelineChannel channel_;
  TensorPointer previous_, next_;
  std::map<int, InFlight> live_;
  int peak_live_ = 0;
  std::vector<at::Tensor> losses_;
  AuxiliaryLosses aux_losses_;
};

}  // namespace triax
