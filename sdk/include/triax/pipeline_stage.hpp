// What one pipeline rank does with one micro-batch, for engine plugins: receive the previous
// stage's activations, run this rank's blocks, send the result on; in backward, receive the
// gradient of what was sent, backpropagate, send the gradient of what was received. An engine
// is then only a schedule: the order in which it calls forward() and backward() (per model
// chunk, when it asked for several), or, splitting each backward, backward_input() (B) and
// backward_weight() (W). Where the host records the step's passes (ABI 1.14), each pass and
// transfer is timed here, for every engine.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "triax/aux_losses.hpp"
#include "triax/chunk_placement.hpp"
#include "triax/engine.hpp"
#include "triax/pipeline_channel.hpp"
#include "triax/weight_gradient_queue.hpp"

namespace triax {

struct PipelineStageOptions {
  // Where the rank's chunks sit (as the engine told the host: triax_engine_vtable.chunk_placement).
  triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED;
  // Each forward hands the model a queue for its weight-gradient products (ABI 1.13), which
  // backward_weight() runs after backward_input(): zero-bubble schedules.
  bool split_backward = false;
};

// One pipeline rank's model chunks (one, unless the engine asked for more): chunk c is virtual
// stage v = virtual_stage_of(placement, pp_size, pp_rank, c), c x pp_size + pp_rank when
// interleaved; it receives from virtual stage v - 1 and sends to v + 1, wherever they are (two
// chunks of one rank hand over in memory).
class PipelineStage {
 public:
  PipelineStage(const EngineContext& context, const StepRequest& request, PipelineStageOptions options = {});

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
  // The backward split in two (options.split_backward): B receives the gradient of what was sent,
  // computes every gradient but the deferred weights' and sends the gradient of what was
  // received; W computes the deferred weights' gradients and calls the after_backward hook. The
  // micro-batch counts as in flight until its W.
  void backward_input(int chunk, int index);
  void backward_input(int index) { backward_input(0, index); }
  void backward_weight(int chunk, int index) { run_backward_weight(chunk, index); }
  void backward_weight(int index) { backward_weight(0, index); }

  // Forward only, without gradients, of micro-batch `index` through `chunk` (validation): receive,
  // run, send on; nothing is kept but the loss on the last virtual stage (see losses()).
  void evaluate(int chunk, int index);

  // The parts of forward() and backward(), for engines that place the transfers themselves
  // (each transfer only where there is a peer: the receives before the run, the sends after).
  void receive_input(int chunk, int index);
  void run_forward(int chunk, int index);
  void send_output(int chunk, int index);
  void receive_output_gradient(int chunk, int index);
  void run_backward(int chunk, int index);  // run_backward_input, then run_backward_weight
  void run_backward_input(int chunk, int index);
  void run_backward_weight(int chunk, int index);
  void send_input_gradient(int chunk, int index);

  // (chunk, micro-batch) pairs forwarded but not yet through their whole backward, now and at
  // most so far: measured from the graphs and deferred products this rank holds.
  int live_micro_batches() const { return static_cast<int>(live_.size() + awaiting_weights_.size()); }
  int peak_live_micro_batches() const { return peak_live_; }

  // The LM loss of each micro-batch run through the last virtual stage, in the order run.
  const std::vector<at::Tensor>& losses() const { return losses_; }

  // The step's result once every micro-batch went both ways through every chunk: the mean LM
  // loss on the last virtual stage, the mean auxiliary loss of this rank's blocks where they have
  // one. An engine that left a backward unfinished (a W never run) gets an error saying which.
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
  StageHolder holder_of(int stage) const { return holder_of_virtual_stage(options_.placement, pp_size_, stage); }
  TensorPointer previous(int chunk) const;  // pipeline rank of virtual stage - 1
  TensorPointer next(int chunk) const;      // pipeline rank of virtual stage + 1
  // What crosses a boundary, from another rank or handed over by this rank's chunk before.
  std::vector<at::Tensor> receive_boundary(int chunk, int index);
  void send_boundary(int chunk, int index, const std::vector<at::Tensor>& boundary);
  void check_nothing_left() const;
  // Runs `work`, one pass or transfer; where the host records the step's passes, tells it how long
  // that took, the device's work waited for (nothing is timed otherwise).
  template <class Work>
  void timed(triax_pass_kind kind, int chunk, int index, Work&& work);
  void compute_forward(int chunk, int index);
  void compute_backward_input(int chunk, int index);
  void compute_backward_weight(int chunk, int index);

  const StepRequest& request_;
  int pp_rank_, pp_size_;
  PipelineStageOptions options_;
  c10::Device device_;
  PipelineChannel channel_;
  std::map<Key, StageInput> inputs_;                                      // received, not yet forwarded
  std::map<Key, InFlight> live_;                                          // forwarded, not yet backpropagated
  std::map<Key, std::vector<at::Tensor>> outputs_;                        // forwarded, not yet sent
  std::map<Key, std::vector<at::Tensor>> output_gradients_;               // received, not yet backpropagated
  std::map<Key, std::vector<at::Tensor>> input_gradients_;                // backpropagated, not yet sent
  std::map<Key, std::vector<at::Tensor>> handed_inputs_;                  // from this rank's chunk before, by receiver
  std::map<Key, std::vector<at::Tensor>> handed_gradients_;               // from this rank's chunk after, by receiver
  std::map<Key, std::unique_ptr<WeightGradientQueue>> weight_gradients_;  // deferred products, until W
  std::set<Key> awaiting_weights_;                                        // through B, not yet through W
  int peak_live_ = 0;
  std::vector<at::Tensor> losses_;
  AuxiliaryLosses aux_losses_;
};

}  // namespace triax
