#include "host_snapshot.hpp"

#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include "triax/kernels/piece_copies.hpp"
#endif

namespace triax::checkpoint {

#ifdef TRIAX_WITH_CUDA
struct HostSnapshot::CopyFence {
  c10::cuda::CUDAStream side;
  // Timed, so that copy_times() can tell what the copies cost on the device.
  at::cuda::CUDAEvent begun{cudaEventDefault};   // the side stream starts the copies
  at::cuda::CUDAEvent staged{cudaEventDefault};  // the pieces are read: the optimizer may change them
  at::cuda::CUDAEvent copied{cudaEventDefault};  // the host buffer holds them: the writing thread may read it
  // On the training stream, around the first optimizer step's wait for `staged` after a take.
  at::cuda::CUDAEvent optimizer_waits{cudaEventDefault};
  at::cuda::CUDAEvent optimizer_goes{cudaEventDefault};
  bool stall_pending = false;   // the take's first optimizer step is yet to come
  bool stall_recorded = false;  // it came: the two events above are the take's
  int64_t retries_at_take = 0;  // the caching allocator's retries so far, when the take began
  bool staged_before = false;   // the last take staged pieces (and its buffer is still held)
  DeviceStaging staging;
  // A high-priority stream: the copies' blocks are scheduled ahead of the next forward's, so they
  // are done early in it instead of trailing behind its kernels to the optimizer step.
  explicit CopyFence(c10::Device device)
      : side(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index())), staging(device) {}
};

namespace {

int64_t allocator_retries(c10::Device device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).num_alloc_retries;
}

}  // namespace
#else
struct HostSnapshot::CopyFence {};
#endif

std::string CopyTimes::describe() const {
  std::string text = "the copies took " + std::to_string(device_copies) + " s on the device and " +
                     std::to_string(host_copy) + " s from the staging buffer to host memory; ";
  text += stall_measured ? "the next optimizer step waited " + std::to_string(stall) + " s for them"
                         : "no optimizer step waited for them";
  if (allocator_retries > 0)
    text += "; the caching allocator ran out of memory and retried " + std::to_string(allocator_retries) +
            " times since the copies began";
  return text;
}

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
    fence_->begun.record(fence_->side);
    fence_->stall_pending = true;
    fence_->stall_recorded = false;
    // The staging buffer is held from save to save: a retry since the last take is beside it.
    const int64_t retries = allocator_retries(device_);
    conditions.allocator_retried = fence_->staged_before && retries > fence_->retries_at_take;
    fence_->retries_at_take = retries;
    StagingPlan plan = fence_->staging.prepare(sizes, conditions);
    fence_->staged_before = plan.staged_bytes > 0;
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
  if (!fence_) return;
  std::vector<PieceCopy> staged;
  for (const PieceCopy& piece : copies)
    if (piece.staged) staged.push_back(piece);
  for (const PieceCopy& piece : copy_staged_in_one_launch(staged))
    fence_->staging.piece_at(piece.offset, piece.source).copy_(piece.source, /*non_blocking=*/true);
#endif
}

std::vector<HostSnapshot::PieceCopy> HostSnapshot::copy_staged_in_one_launch(
    [[maybe_unused]] const std::vector<PieceCopy>& staged) {
  std::vector<PieceCopy> left;
#ifdef TRIAX_WITH_CUDA
  using kernels::DeviceCopyPiece;
  std::vector<DeviceCopyPiece> table;
  for (const PieceCopy& piece : staged) {
    if (!piece.source.is_contiguous() || !piece.source.is_cuda()) {
      left.push_back(piece);
      continue;
    }
    table.push_back({piece.source.data_ptr(), fence_->staging.piece_at(piece.offset, piece.source).data_ptr(),
                     static_cast<int64_t>(piece.source.nbytes()), 0});
  }
  const int64_t chunks = kernels::number_chunks(table);
  if (table.empty()) return left;
  // The table goes to the device on the side stream, from pinned memory that the caching host
  // allocator keeps until that copy is done.
  const auto table_bytes = static_cast<int64_t>(table.size() * sizeof(DeviceCopyPiece));
  at::Tensor host_table = at::empty({table_bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  std::memcpy(host_table.data_ptr(), table.data(), static_cast<size_t>(table_bytes));
  const at::Tensor device_table = host_table.to(device_, /*non_blocking=*/true);
  C10_CUDA_CHECK(kernels::launch_piece_copies(static_cast<const DeviceCopyPiece*>(device_table.data_ptr()),
                                              static_cast<int64_t>(table.size()), chunks, kernels::kCopyChunkBytes,
                                              fence_->side));
#endif
  return left;
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
  if (!fence_) return;
  const c10::cuda::CUDAStream training = c10::cuda::getCurrentCUDAStream(device_.index());
  const bool first = fence_->stall_pending;
  if (first) fence_->optimizer_waits.record(training);
  fence_->staged.block(training);
  if (first) fence_->optimizer_goes.record(training);
  fence_->stall_pending = false;
  fence_->stall_recorded = fence_->stall_recorded || first;
#endif
}

void HostSnapshot::wait_until_copied() {
#ifdef TRIAX_WITH_CUDA
  if (fence_) fence_->copied.synchronize();
#endif
}

CopyTimes HostSnapshot::copy_times() {
  CopyTimes times;
#ifdef TRIAX_WITH_CUDA
  if (!fence_ || !fence_->copied.isCreated()) return times;
  fence_->copied.synchronize();
  constexpr double kSecondsPerMillisecond = 1e-3;
  times.device_copies = fence_->begun.elapsed_time(fence_->staged) * kSecondsPerMillisecond;
  times.host_copy = fence_->staged.elapsed_time(fence_->copied) * kSecondsPerMillisecond;
  if (fence_->stall_recorded) {
    fence_->optimizer_goes.synchronize();
    times.stall = fence_->optimizer_waits.elapsed_time(fence_->optimizer_goes) * kSecondsPerMillisecond;
    times.stall_measured = true;
  }
  times.allocator_retries = allocator_retries(device_) - fence_->retries_at_take;
#endif
  return times;
}

}  // namespace triax::checkpoint
