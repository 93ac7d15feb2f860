#include "checkpoint/host_snapshot.hpp"

#include <ATen/ATen.h>

#include <map>
#include <numeric>
#include <optional>
#include <set>
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

struct HostSnapshot::PieceCopy {
  at::Tensor source;  // the live tensor
  at::Tensor host;    // its copy in the allocation
  int64_t offset;     // the copy's place in the allocation, and in the staging buffer when staged
  bool staged;
};

std::vector<int64_t> HostSnapshot::piece_sizes(const RankContents& live) {
  std::vector<int64_t> sizes;
  std::set<const NamedParameter*> seen;  // as place_pieces: a parameter listed twice is copied once
  for (const NamedParameter* p : live.parameters)
    if (seen.insert(p).second) sizes.push_back(aligned(static_cast<int64_t>(p->tensor.nbytes())));
  for (const StateTensorToSave& state : live.optimizer_state)
    sizes.push_back(aligned(static_cast<int64_t>(state.tensor.nbytes())));
  return sizes;
}

void HostSnapshot::prepare(const RankContents& live) {
  const std::vector<int64_t> sizes = piece_sizes(live);
  reserve(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}));
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

RankContents HostSnapshot::take(const RankContents& live, StagingConditions conditions) {
  const std::vector<int64_t> sizes = piece_sizes(live);
  reserve(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}));
  const StagingPlan plan = begin_copies(sizes, conditions);
  std::vector<PieceCopy> copies;
  RankContents copy = place_pieces(live, plan, copies);
#ifdef TRIAX_WITH_CUDA
  std::optional<c10::cuda::CUDAStreamGuard> on_side_stream;  // the copies, and end_copies' copy
  if (fence_) on_side_stream.emplace(fence_->side);
#endif
  issue_copies(copies);
  end_copies(plan.staged_bytes);
  return copy;
}

StagingPlan HostSnapshot::begin_copies(const std::vector<int64_t>& sizes,
                                       [[maybe_unused]] StagingConditions conditions) {
  copy_path_.clear();
#ifdef TRIAX_WITH_CUDA
  if (fence_) {
    // The copies read what the work already queued (the last optimizer step) leaves.
    at::cuda::CUDAEvent queued;
    queued.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    queued.block(fence_->side);
    StagingPlan plan = fence_->staging.prepare(sizes, conditions);
    copy_path_ = fence_->staging.decision();
    return plan;
  }
#endif
  return plan_staging(sizes, StagingRoom{});  // no device memory to stage in: every piece direct
}

RankContents HostSnapshot::place_pieces(const RankContents& live, const StagingPlan& plan,
                                        std::vector<PieceCopy>& copies) {
  parameters_.clear();
  // The staged pieces lie first, so that the staging buffer goes to the host in one copy.
  int64_t staged_offset = 0, direct_offset = plan.staged_bytes;
  auto next_copy = [&](const at::Tensor& source) {
    const bool staged = plan.staged[copies.size()];
    int64_t& offset = staged ? staged_offset : direct_offset;
    const int64_t bytes = static_cast<int64_t>(source.nbytes());
    at::Tensor host = arena_.narrow(0, offset, bytes).view(source.scalar_type()).view(source.sizes());
    copies.push_back(PieceCopy{source.detach(), host, offset, staged});
    offset += aligned(bytes);
    return host;
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

void HostSnapshot::issue_copies(const std::vector<PieceCopy>& copies) {
  // The direct copies are the slow ones (over PCIe): queued first, they overlap the next forward
  // and backward, and the optimizer step waits for what is left of them.
  for (const PieceCopy& piece : copies)
    if (!piece.staged) piece.host.copy_(piece.source, /*non_blocking=*/fence_ != nullptr);
#ifdef TRIAX_WITH_CUDA
  for (const PieceCopy& piece : copies)
    if (piece.staged) fence_->staging.piece_at(piece.offset, piece.source).copy_(piece.source, /*non_blocking=*/true);
#endif
}

void HostSnapshot::end_copies([[maybe_unused]] int64_t staged_bytes) {
#ifdef TRIAX_WITH_CUDA
  if (!fence_) return;
  fence_->staged.record(fence_->side);
  // The staging buffer goes to host memory in one copy, while the next steps run.
  if (staged_bytes > 0)
    arena_.narrow(0, 0, staged_bytes).copy_(fence_->staging.first_bytes(staged_bytes), /*non_blocking=*/true);
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
