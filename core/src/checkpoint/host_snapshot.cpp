#include "checkpoint/host_snapshot.hpp"

#include <ATen/ATen.h>

#include <optional>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace triax::checkpoint {

#ifdef TRIAX_WITH_CUDA
struct HostSnapshot::CopyFence {
  c10::cuda::CUDAStream side;
  at::cuda::CUDAEvent copied;
  explicit CopyFence(c10::DeviceIndex index) : side(c10::cuda::getStreamFromPool(false, index)) {}
};
#else
struct HostSnapshot::CopyFence {};
#endif

HostSnapshot::HostSnapshot(c10::Device device) : device_(device) {
#ifdef TRIAX_WITH_CUDA
  if (device_.is_cuda()) fence_ = std::make_unique<CopyFence>(device_.index());
#endif
}
HostSnapshot::~HostSnapshot() = default;

at::Tensor HostSnapshot::copy_into_buffer(const std::string& key, const at::Tensor& source) {
  at::Tensor& buffer = buffers_[key];
  if (!buffer.defined() || buffer.sizes() != source.sizes() || buffer.scalar_type() != source.scalar_type())
    buffer = at::empty(source.sizes(), at::TensorOptions().dtype(source.scalar_type()).pinned_memory(fence_ != nullptr));
  buffer.copy_(source.detach(), /*non_blocking=*/fence_ != nullptr);
  return buffer;
}

RankContents HostSnapshot::take(const RankContents& live) {
#ifdef TRIAX_WITH_CUDA
  std::optional<c10::cuda::CUDAStreamGuard> on_side_stream;
  if (fence_) {
    // The copies read what the work already queued (the last optimizer step) leaves.
    at::cuda::CUDAEvent queued;
    queued.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    queued.block(fence_->side);
    on_side_stream.emplace(fence_->side);
  }
#endif
  parameters_.clear();
  std::map<const NamedParameter*, const NamedParameter*> copy_of;
  auto snapshot_of = [&](const NamedParameter* p, bool with_values) {
    const NamedParameter*& copy = copy_of[p];
    if (copy == nullptr) {  // a parameter whose state alone is saved needs only its shape
      at::Tensor values = with_values ? copy_into_buffer(parameter_dataset(p->name), p->tensor)
                                      : at::empty(p->tensor.sizes(), at::TensorOptions().device(at::kMeta));
      copy = &parameters_.emplace_back(NamedParameter{p->name, values, p->spec});
    }
    return copy;
  };
  RankContents copy;
  for (const NamedParameter* p : live.parameters) copy.parameters.push_back(snapshot_of(p, true));
  for (const StateTensorToSave& state : live.optimizer_state) {
    StateTensorToSave saved = state;
    saved.parameter = snapshot_of(state.parameter, false);
    saved.tensor = copy_into_buffer(optimizer_dataset(state.parameter->name, state.name), state.tensor);
    copy.optimizer_state.push_back(std::move(saved));
  }
  copy.rng_states = live.rng_states;  // already host copies, made for this save
  copy.element_ranges = live.element_ranges;
#ifdef TRIAX_WITH_CUDA
  if (fence_) fence_->copied.record(fence_->side);
#endif
  return copy;
}

void HostSnapshot::before_optimizer_step() {
#ifdef TRIAX_WITH_CUDA
  if (fence_) fence_->copied.block(c10::cuda::getCurrentCUDAStream(device_.index()));
#endif
}

void HostSnapshot::wait_until_copied() {
#ifdef TRIAX_WITH_CUDA
  if (fence_) fence_->copied.synchronize();
#endif
}

int64_t HostSnapshot::buffer_bytes() const {
  int64_t bytes = 0;
  for (const auto& [key, buffer] : buffers_) bytes += static_cast<int64_t>(buffer.nbytes());
  return bytes;
}

}  // namespace triax::checkpoint
