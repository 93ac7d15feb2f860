#include "checkpoint/host_snapshot.hpp"

#include "checkpoint/device_staging.hpp"

#include <ATen/ATen.h>

#include <map>
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
  at::cuda::CUDAEvent staged;  // the pieces are read: the optimizer may change them
  at::cuda::CUDAEvent copied;  // the host buffer holds them: the writing thread may read it
  DeviceStaging staging;
  explicit CopyFence(c10::Device device)
      : side(c10::cuda::getStreamFromPool(false, device.index())), staging(device) {}
};
#else
struct HostSnapshot::CopyFence {};
#endif

HostSnapshot::HostSnapshot(c10::Device device) : device_(device) {
#ifdef TRIAX_WITH_CUDA
  if (device_.is_cuda()) fence_ = std::make_unique<CopyFence>(device_);
#endif
}
HostSnapshot::~HostSnapshot() = default;

namespace {

constexpr int64_t kAlignment = 64;  // every copy starts on a cache line
int64_t aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

int64_t HostSnapshot::bytes_needed(const RankContents& live) {
  int64_t total = 0;
  for (const NamedParameter* p : live.parameters) total += aligned(static_cast<int64_t>(p->tensor.nbytes()));
  for (const StateTensorToSave& state : live.optimizer_state) total += aligned(static_cast<int64_t>(state.tensor.nbytes()));
  return total;
}

void HostSnapshot::reserve(int64_t bytes) {
  if (buffer_bytes() >= bytes) return;
  arena_ = at::Tensor();  // the old allocation goes first
#ifdef TRIAX_WITH_CUDA
  if (fence_) {
    void* memory = nullptr;
    C10_CUDA_CHECK(cudaHostAlloc(&memory, static_cast<size_t>(bytes), cudaHostAllocDefault));
    arena_ = at::from_blob(memory, {bytes}, [](void* pinned) { cudaFreeHost(pinned); },
                           at::TensorOptions().dtype(at::kByte));
    return;
  }
#endif
  arena_ = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  arena_.zero_();  // faults every page in now, not during the first save's copies
}

at::Tensor HostSnapshot::copy_at(int64_t offset, const at::Tensor& source) {
  const int64_t bytes = static_cast<int64_t>(source.nbytes());
  at::Tensor copy = arena_.narrow(0, offset, bytes).view(source.scalar_type()).view(source.sizes());
#ifdef TRIAX_WITH_CUDA
  if (staging_) {
    fence_->staging.piece_at(offset, source).copy_(source.detach(), /*non_blocking=*/true);
    return copy;  // filled by end_copies' one copy of the whole staging buffer
  }
#endif
  copy.copy_(source.detach(), /*non_blocking=*/fence_ != nullptr);
  return copy;
}

RankContents HostSnapshot::take(const RankContents& live, bool steps_measured) {
  const int64_t bytes = bytes_needed(live);
  reserve(bytes);
  begin_copies(bytes, steps_measured);
#ifdef TRIAX_WITH_CUDA
  std::optional<c10::cuda::CUDAStreamGuard> on_side_stream;  // the copies, and end_copies' copy
  if (fence_) on_side_stream.emplace(fence_->side);
#endif
  RankContents copy = copy_pieces(live);
  end_copies(bytes);
  return copy;
}

void HostSnapshot::begin_copies([[maybe_unused]] int64_t bytes, [[maybe_unused]] bool steps_measured) {
  staging_ = false;
  copy_path_.clear();
#ifdef TRIAX_WITH_CUDA
  if (!fence_) return;
  // The copies read what the work already queued (the last optimizer step) leaves.
  at::cuda::CUDAEvent queued;
  queued.record(c10::cuda::getCurrentCUDAStream(device_.index()));
  queued.block(fence_->side);
  staging_ = fence_->staging.prepare(bytes, steps_measured);
  copy_path_ = fence_->staging.decision();
#endif
}

RankContents HostSnapshot::copy_pieces(const RankContents& live) {
  parameters_.clear();
  int64_t offset = 0;
  auto next_copy = [&](const at::Tensor& source) {
    at::Tensor copy = copy_at(offset, source);
    offset += aligned(static_cast<int64_t>(source.nbytes()));
    return copy;
  };
  std::map<const NamedParameter*, const NamedParameter*> copy_of;
  auto snapshot_of = [&](const NamedParameter* p, bool with_values) {
    const NamedParameter*& copy = copy_of[p];
    if (copy == nullptr) {  // a parameter whose state alone is saved needs only its shape
      at::Tensor values = with_values ? next_copy(p->tensor)
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
    saved.tensor = next_copy(state.tensor);
    copy.optimizer_state.push_back(std::move(saved));
  }
  copy.rng_states = live.rng_states;  // already host copies, made for this save
  copy.element_ranges = live.element_ranges;
  return copy;
}

void HostSnapshot::end_copies([[maybe_unused]] int64_t bytes) {
#ifdef TRIAX_WITH_CUDA
  if (!fence_) return;
  fence_->staged.record(fence_->side);
  // The staging buffer goes to host memory in one copy, while the next steps run.
  if (staging_) arena_.narrow(0, 0, bytes).copy_(fence_->staging.first_bytes(bytes), /*non_blocking=*/true);
  fence_->copied.record(fence_->side);
#endif
}

void HostSnapshot::before_optimizer_step() {
#ifdef TRIAX_WITH_CUDA
  if (fence_) fence_->staged.block(c10::cuda::getCurrentCUDAStream(device_.index()));
#endif
}

void HostSnapshot::wait_until_copied() {
#ifdef TRIAX_WITH_CUDA
  if (fence_) fence_->copied.synchronize();
#endif
}

}  // namespace triax::checkpoint
