// Point-to-point transfers of what crosses a pipeline boundary (one or more tensors) and of
// their gradients, over the pipeline group. Activations travel after one small header (their
// count, dtypes and shapes), so the receiver needs no knowledge of the sender's shapes; each
// floating-point activation's gradient comes back shaped like it.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "triax/host.hpp"

namespace triax {

// A tensor that lives on another pipeline rank (nanotron's TensorPointer): a stage's input on
// every stage but the first, and its output on every stage but the last.
struct TensorPointer {
  int pp_rank = -1;  // rank within the pipeline group; -1: no such tensor
  bool valid() const { return pp_rank >= 0; }
};

class PipelineChannel {
 public:
  explicit PipelineChannel(Host host) : host_(host) {}
  void send_activations(const std::vector<at::Tensor>& activations, TensorPointer to) const;
  std::vector<at::Tensor> receive_activations(TensorPointer from, c10::Device device) const;
  // `gradients` follow the floating-point entries of the activations they belong to.
  void send_gradients(const std::vector<at::Tensor>& gradients, TensorPointer to) const;
  std::vector<at::Tensor> receive_gradients(const std::vector<at::Tensor>& activations, TensorPointer from) const;

  // Only floating-point boundary tensors carry gradients back.
  static bool carries_gradient(const at::Tensor& tensor);

 private:
  Host host_;
};

}  // namespace triax
