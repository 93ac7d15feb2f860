// What one pipeline rank does with one micro-batch, for engine plugins: receive the previous
// stage's activations, run this rank's blocks, send the result on; in backward, receive the
// gradient of what was sent, backpropagate, send the gradient of what was received. An engine
// is then only a schedule: the order in which it calls forward() and backward() (per model
// chunk, when it asked for several).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <utility>
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

// Point-to-point transfers of what crosses a pipeline boundary (one or more tensors) and of
// their gradients, over the pipeline group. Activations travel after one small header (their
// count, dtypes and shapes), so the receiver needs no knowledge of the sender's shapes; each
// floating-point activation's gradient comes back shaped like it.
class PipelineChannel {
 public:
  explicit PipelineChannel(Host host) : host_(host) {}
  void send_activations(const std::vector<at::Tensor>& activations, TensorPointer to) const;
  std::vector<at::Tensor> receive_activations(TensorPointer from, c10::Device device) const;
  // `gradients` follow the floating-point entries of the activations they belong to.
  void send_gradients(const std::vector<at::Tensor>& gradients, TensorPointer to) const;
  std::vector<at::Tensor> receive_gradients(const std::vector<at::Tensor>& activations, TensorPointer from) const;

 private:
  Host host_;
};

// One pipeline rank's model chunks (one, unless the engine asked for more): chunk c is virtual
// stage v = c x pp_size + pp_rank; it receives from virtual stage v - 1 (pipeline rank
// pp_rank - 1, or the last rank's chunk c - 1 when pp_rank is 0) and sends to v + 1.
class PipelineStage {
 public:
  PipelineStage(const EngineContext& context, const StepRequest& request);

  int chunk_count() const { return request_.chunk_count(); }
  bool is_first(int chunk = 0) const { return virtual_stage(chunk) == 0; }
  bool is_last(int chunk = 0) const { return virtual_stage(chunk) == virtual_stage_count() - 1; }

  // Forward of micro-batch `index` through `chunk`: receive the previous stage's output, run the
  // chunk, send the result on; keeps the graph alive until backward(chunk, index).
  void forward(int chunk, int index);
  void forward(int index) { forward(0, index); }
  // Backward of micro-batch `index` through `chunk` (forwarded before): receive the gradient of
  // what was sent, backpropagate, call the host's after_backward hook for the chunk, send the
  // gradient of what was received.
  void backward(int chunk, int index);
  void backward(int index) { backward(0, index); }

  // Forward only, without gradients, of micro-batch `index` through `chunk` (validation): receive,
  // run, send on; nothing is kept but the loss on the last virtual stage (see losses()).
  void evaluate(int chunk, int index);

  // The parts of forward() and backward(), for engines that place the transfers themselves
  // (each transfer only where there is a peer: the receives before the run, the sends after).
  void receive_input(int chunk, int index);
  void run_forward(int chunk, int index);
  void send_output(int chunk, int index);
  void receive_output_gradient(int chunk, int index);
  void run_backward(int chunk, int index);
  void send_input_gradient(int chunk, int index);

  // (chunk, micro-batch) pairs forwarded but not yet backpropagated, now and at most so far:
  // measured from the graphs this rank holds.
  int live_micro_batches() const { return static_cast<int>(live_.size()); }
  int peak_live_micro_batches() const { return peak_live_; }

  // The LM loss of each micro-batch run through the last virtual stage, in the order run.
  const std::vector<at::Tensor>& losses() const { return losses_; }

  // The step's result once every micro-batch went both ways through every chunk: the mean LM
  // loss on the last virtual stage, the mean auxiliary loss of this rank's blocks where they have one.
  StepResult finish();

 private:
  using Key = std::pair<int, int>;  // (chunk, micro-batch)
  struct InFlight {
    std::vector<at::Tensor> boundary_in;   // received (leaves of this graph), not on the first stage
    std::vector<at::Tensor> boundary_out;  // sent on, not on the last stage
    at::Tensor objective;                  // (loss on the last stage + aux loss) / micro-batch count, or undefined
  };

  int virtual_stage(int chunk) const;
  int virtual_stage_count() const { return pp_size_ * chunk_count(); }
  TensorPointer previous(int chunk) const;  // pipeline rank of virtual stage - 1
  TensorPointer next(int chunk) const;      // pipeline rank of virtual stage + 1

  const StepRequest& request_;
  int pp_rank_, pp_size_;
  c10::Device device_;
  PipelineChannel channel_;
  std::map<Key, StageInput> inputs_;                         // received, not yet forwarded
  std::map<Key, InFlight> live_;                             // forwarded, not yet backpropagated
  std::map<Key, std::vector<at::Tensor>> outputs_;           // forwarded, not yet sent
  std::map<Key, std::vector<at::Tensor>> output_gradients_;  // received, not yet backpropagated
  std::map<Key, std::vector<at::Tensor>> input_gradients_;   // backpropagated, not yet sent
  int peak_live_ = 0;
  std::vector<at::Tensor> losses_;
  AuxiliaryLosses aux_losses_;
};

}  // namespace triax
