#include "triax/pipeline_channel.hpp"

#include <ATen/ATen.h>

#include <string>

#include "triax/error.hpp"

namespace triax {
namespace {

// Header of a boundary: the tensor count, then per tensor its dtype, rank and sizes (unused 0).
constexpr int64_t kTensorHeaderLength = 2 + TRIAX_MAX_TENSOR_DIMS;
constexpr int64_t kHeaderLength = 1 + TRIAX_MAX_BOUNDARY_TENSORS * kTensorHeaderLength;

}  // namespace

bool PipelineChannel::carries_gradient(const at::Tensor& tensor) { return at::isFloatingType(tensor.scalar_type()); }

void PipelineChannel::send_activations(const std::vector<at::Tensor>& activations, TensorPointer to) const {
  if (activations.empty() || static_cast<int64_t>(activations.size()) > TRIAX_MAX_BOUNDARY_TENSORS)
    throw Error("pipeline: a boundary carries 1 to " + std::to_string(TRIAX_MAX_BOUNDARY_TENSORS) + " tensors, not " +
                std::to_string(activations.size()));
  at::Tensor header = at::zeros({kHeaderLength}, at::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = static_cast<int64_t>(activations.size());
  for (size_t i = 0; i < activations.size(); ++i) {
    const at::Tensor& activation = activations[i];
    if (!activation.defined()) throw Error("pipeline: boundary tensor " + std::to_string(i) + " is undefined");
    if (activation.dim() > TRIAX_MAX_TENSOR_DIMS)
      throw Error("pipeline: an activation of " + std::to_string(activation.dim()) + " dimensions cannot be sent");
    const int64_t base = 1 + static_cast<int64_t>(i) * kTensorHeaderLength;
    h[base] = static_cast<int64_t>(activation.scalar_type());
    h[base + 1] = activation.dim();
    for (int64_t d = 0; d < activation.dim(); ++d) h[base + 2 + d] = activation.size(d);
  }
  host_.send(TRIAX_GROUP_PP, header.to(activations.front().device()), to.pp_rank);
  for (const at::Tensor& activation : activations)
    host_.send(TRIAX_GROUP_PP, activation.detach().contiguous(), to.pp_rank);
}

std::vector<at::Tensor> PipelineChannel::receive_activations(TensorPointer from, c10::Device device) const {
  at::Tensor header = at::empty({kHeaderLength}, at::TensorOptions().dtype(at::kLong).device(device));
  host_.recv(TRIAX_GROUP_PP, header, from.pp_rank);
  header = header.cpu();
  auto h = header.accessor<int64_t, 1>();
  const std::string malformed =
      "pipeline: a malformed activation header came from pipeline rank " + std::to_string(from.pp_rank);
  if (h[0] < 1 || h[0] > TRIAX_MAX_BOUNDARY_TENSORS) throw Error(malformed);
  std::vector<at::Tensor> activations;
  for (int64_t i = 0; i < h[0]; ++i) {
    const int64_t base = 1 + i * kTensorHeaderLength;
    if (h[base + 1] < 0 || h[base + 1] > TRIAX_MAX_TENSOR_DIMS) throw Error(malformed);
    std::vector<int64_t> sizes(h.data() + base + 2, h.data() + base + 2 + h[base + 1]);
    activations.push_back(
        at::empty(sizes, at::TensorOptions().dtype(static_cast<c10::ScalarType>(h[base])).device(device)));
  }
  for (at::Tensor& activation : activations) host_.recv(TRIAX_GROUP_PP, activation, from.pp_rank);
  return activations;
}

void PipelineChannel::send_gradients(const std::vector<at::Tensor>& gradients, TensorPointer to) const {
  for (const at::Tensor& gradient : gradients) host_.send(TRIAX_GROUP_PP, gradient.contiguous(), to.pp_rank);
}

std::vector<at::Tensor> PipelineChannel::receive_gradients(const std::vector<at::Tensor>& activations,
                                                           TensorPointer from) const {
  std::vector<at::Tensor> gradients;
  for (const at::Tensor& activation : activations) {
    if (!carries_gradient(activation)) continue;
    gradients.push_back(at::empty_like(activation, at::MemoryFormat::Contiguous));
    host_.recv(TRIAX_GROUP_PP, gradients.back(), from.pp_rank);
  }
  return gradients;
}

}  // namespace triax
