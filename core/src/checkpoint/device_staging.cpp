#include "checkpoint/device_staging.hpp"

#include <ATen/ATen.h>

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace triax::checkpoint {
namespace {

std::string gigabytes(int64_t bytes) { return std::to_string(static_cast<double>(bytes) / 1e9) + " GB"; }

}  // namespace

std::string StagingRoom::describe() const {
  if (!steps_measured) return gigabytes(needed) + " needed; no step has run yet to measure the training's peak";
  return gigabytes(needed) + " needed, " + gigabytes(spare()) + " spare (" + gigabytes(total) +
         " of device memory less the steps' peak of " + gigabytes(peak_reserved) + " reserved, " +
         gigabytes(outside_allocator) + " outside the caching allocator and a margin of " + gigabytes(margin) + ")";
}

at::Tensor DeviceStaging::piece_at(int64_t offset, const at::Tensor& like) const {
  return buffer_.narrow(0, offset, static_cast<int64_t>(like.nbytes())).view(like.scalar_type()).view(like.sizes());
}

#ifdef TRIAX_WITH_CUDA

StagingRoom DeviceStaging::measure(int64_t bytes, bool steps_measured) const {
  const c10::cuda::CUDAGuard guard(device_.index());
  size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const auto& reserved = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index())
                             .reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  StagingRoom room;
  room.needed = bytes;
  room.total = static_cast<int64_t>(total);
  room.peak_reserved = reserved.peak;
  // What the device uses beyond the allocator's reservations, this buffer excepted.
  room.outside_allocator = room.total - static_cast<int64_t>(free) - reserved.current - buffer_bytes();
  room.margin = kStagingMargin;
  room.steps_measured = steps_measured;
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

bool DeviceStaging::prepare(int64_t bytes, bool steps_measured) {
  const StagingRoom room = measure(bytes, steps_measured);
  if (!room.fits()) {
    buffer_ = at::Tensor();  // the training's peak grew: give its memory back
    decision_ = "copied to host directly, not staged in device memory: " + room.describe();
    return false;
  }
  if (buffer_bytes() < bytes) {
    buffer_ = at::Tensor();
    if (!allocate(bytes)) {
      decision_ = "copied to host directly, the device refused the staging buffer: " + room.describe();
      return false;
    }
  }
  decision_ = "staged in device memory: " + room.describe();
  return true;
}

#else

// A build without CUDA has no device memory to stage in.
bool DeviceStaging::prepare(int64_t, bool) { return false; }

#endif

}  // namespace triax::checkpoint
