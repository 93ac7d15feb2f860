#include "device_staging.hpp"

#include <ATen/ATen.h>

#include <numeric>

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace triax::checkpoint {
namespace {

std::string gigabytes(int64_t bytes) { return std::to_string(static_cast<double>(bytes) / 1e9) + " GB"; }

// Every piece copied to the host directly.
StagingPlan none_staged(const std::vector<int64_t>& piece_bytes) {
  StagingPlan plan;
  plan.staged.assign(piece_bytes.size(), false);
  plan.direct_bytes = std::accumulate(piece_bytes.begin(), piece_bytes.end(), int64_t{0});
  return plan;
}

}  // namespace

StagingPlan plan_staging(const std::vector<int64_t>& piece_bytes, const StagingRoom& room) {
  StagingPlan plan = none_staged(piece_bytes);
  if (!room.steps_measured) return plan;
  std::vector<size_t> largest_first(piece_bytes.size());
  std::iota(largest_first.begin(), largest_first.end(), size_t{0});
  std::stable_sort(largest_first.begin(), largest_first.end(),
                   [&](size_t a, size_t b) { return piece_bytes[a] > piece_bytes[b]; });
  int64_t left = room.spare();
  for (size_t piece : largest_first) {
    if (piece_bytes[piece] > left) continue;
    plan.staged[piece] = true;
    left -= piece_bytes[piece];
    plan.staged_bytes += piece_bytes[piece];
    plan.direct_bytes -= piece_bytes[piece];
  }
  return plan;
}

std::string StagingRoom::describe() const {
  if (!steps_measured) return gigabytes(needed) + " needed; no step has run yet to measure the training's peak";
  if (allocator_retried)
    return gigabytes(needed) + " needed; none spare: the caching allocator ran out of memory beside the last save's "
           "staging buffer";
  return gigabytes(needed) + " needed, " + gigabytes(spare()) + " spare (" + gigabytes(total) +
         " of device memory less the steps' peak of " + gigabytes(peak_reserved) + " reserved, " +
         gigabytes(outside_allocator) + " outside the caching allocator and a margin of " + gigabytes(margin) + ")";
}

at::Tensor DeviceStaging::piece_at(int64_t offset, const at::Tensor& like) const {
  return buffer_.narrow(0, offset, static_cast<int64_t>(like.nbytes())).view(like.scalar_type()).view(like.sizes());
}

#ifdef TRIAX_WITH_CUDA

StagingRoom DeviceStaging::measure(int64_t bytes, StagingConditions conditions) const {
  const c10::cuda::CUDAGuard guard(device_.index());
  size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  // A copy: getDeviceStats returns its statistics by value, so a reference into them would dangle.
  const c10::CachingAllocator::Stat reserved =
      c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index())
          .reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  StagingRoom room;
  room.needed = bytes;
  room.total = static_cast<int64_t>(total);
  room.peak_reserved = reserved.peak;
  // What the device uses beyond the allocator's reservations, this buffer excepted.
  room.outside_allocator = room.total - static_cast<int64_t>(free) - reserved.current - buffer_bytes();
  room.margin = kStagingMargin;
  room.steps_measured = conditions.steps_measured;
  room.small_room = conditions.small_room;
  room.allocator_retried = conditions.allocator_retried;
  return room;
}

bool DeviceStaging::allocate(int64_t bytes) {
  const c10::cuda::CUDAGuard guard(device_.index());
  void* memory = nullptr;
  if (cudaMalloc(&memory, static_cast<size_t>(bytes)) != cudaSuccess) {
    (void)cudaGetLastError();  // the refusal is answered by the direct copies, not an error
    return false;
  }
  buffer_ = at::from_blob(memory, {bytes}, [](void* device_memory) { cudaFree(device_memory); },
                          at::TensorOptions().dtype(at::kByte).device(device_));
  return true;
}

StagingPlan DeviceStaging::prepare(const std::vector<int64_t>& piece_bytes, StagingConditions conditions) {
  const StagingRoom room =
      measure(std::accumulate(piece_bytes.begin(), piece_bytes.end(), int64_t{0}), conditions);
  const StagingPlan plan = plan_staging(piece_bytes, room);
  if (plan.staged_bytes == 0) {
    buffer_ = at::Tensor();  // no piece fits (the training's peak grew): give its memory back
    decision_ = "copied to host directly, not staged in device memory: " + room.describe();
    return plan;
  }
  if (buffer_bytes() < plan.staged_bytes || buffer_bytes() > room.spare()) {
    buffer_ = at::Tensor();
    if (!allocate(plan.staged_bytes)) {
      decision_ = "copied to host directly, the device refused the staging buffer: " + room.describe();
      return none_staged(piece_bytes);
    }
  }
  if (room.fits()) {
    decision_ = "staged in device memory: " + room.describe();
  } else {
    decision_ = "staged " + gigabytes(plan.staged_bytes) + " (" + std::to_string(plan.staged_pieces()) + " of " +
                std::to_string(piece_bytes.size()) + " pieces, the largest that fit) in device memory, copied " +
                gigabytes(plan.direct_bytes) + " to host directly: " + room.describe();
  }
  return plan;
}

#else

// A build without CUDA has no device memory to stage in.
StagingPlan DeviceStaging::prepare(const std::vector<int64_t>& piece_bytes, StagingConditions) {
  return none_staged(piece_bytes);
}

#endif

}  // namespace triax::checkpoint
