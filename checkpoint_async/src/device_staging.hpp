// A buffer in spare device memory through which an asynchronous save's copies pass on a GPU: the
// pieces are copied device-to-device into it (fast: the next optimizer step waits only for
// these), then the whole buffer goes to the pinned host buffer in one copy while training goes
// on. The buffer is allocated outside the caching allocator and reused from save to save; it
// takes only the device memory left spare beside the training's own peak (StagingRoom): when the
// whole checkpoint does not fit there, the pieces that fit are staged and the others copied to
// the host directly (StagingPlan).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace triax::checkpoint {

// What a save knows of the device's memory when it decides what to stage.
struct StagingConditions {
  bool steps_measured = false;  // a step ran in this process, so the allocator's peak is the training's
  bool small_room = false;      // TRIAX_FAULT=small_staging_room: spare bytes capped at half those needed
  // The caching allocator ran out of memory and retried (freeing its cache, a stall) while the
  // last staged save was in flight: its peak grew beyond the measured one, so stage nothing.
  bool allocator_retried = false;
};

// The device memory a save may take for staging, all in bytes.
struct StagingRoom {
  int64_t needed = 0;             // one checkpoint's bytes of this rank (its host buffer's size)
  int64_t total = 0;              // the device's memory
  int64_t peak_reserved = 0;      // the caching allocator's peak reserved bytes over the steps so far
  int64_t outside_allocator = 0;  // held outside the allocator (CUDA context, communication buffers)
  int64_t margin = 0;             // kept free for the allocator's growth after the measured steps
  bool steps_measured = false;    // a step ran in this process, so the peak is the training's
  bool small_room = false;        // a test's cap: at most half the bytes needed are spare
  bool allocator_retried = false;  // during the last staged save: no room is spare

  // The device's free memory (total less the allocator's reservations and what lies outside it)
  // less the growth the allocator had at the steps' peak beyond what it holds now, less the margin.
  int64_t spare() const {
    if (allocator_retried) return 0;
    const int64_t free_beside_peak = total - peak_reserved - outside_allocator - margin;
    return small_room ? std::min(free_beside_peak, needed / 2) : free_beside_peak;
  }
  bool fits() const { return steps_measured && needed <= spare(); }
  // "24.0 GB needed, 30.1 GB spare (80.0 GB of device memory, the steps' peak 45.2 GB reserved, ...)".
  std::string describe() const;
};

// What StagingRoom keeps free: 2 GiB, for the caching allocator's peak to grow a little after the
// steps it was measured on (fragmentation, a validation pass) without an out-of-memory error.
inline constexpr int64_t kStagingMargin = int64_t{2} << 30;

// Which of a save's pieces go through the staging buffer; the others are copied to the host
// directly.
struct StagingPlan {
  std::vector<bool> staged;  // one per piece, in the order given
  int64_t staged_bytes = 0;
  int64_t direct_bytes = 0;
  int64_t staged_pieces() const { return std::count(staged.begin(), staged.end(), true); }
};

// The largest pieces first, each one that still fits in the room's spare bytes (of equal sizes,
// the earlier first): simple, deterministic, and the many small pieces (norms, biases) that are
// left over cost the direct copies little. Every piece when the whole checkpoint fits; none
// before a step was measured.
StagingPlan plan_staging(const std::vector<int64_t>& piece_bytes, const StagingRoom& room);

class DeviceStaging {
 public:
  explicit DeviceStaging(c10::Device device) : device_(device) {}
  ~DeviceStaging() = default;
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // Which of the pieces of these sizes this save stages (plan_staging, on a CUDA device only), then
  // holding a buffer of at least their bytes within the spare memory: a buffer that no longer
  // fits is freed, a new one has exactly the staged bytes. decision() says which and why.
  StagingPlan prepare(const std::vector<int64_t>& piece_bytes, StagingConditions conditions);
  const std::string& decision() const { return decision_; }
  // The buffer's `like`-shaped piece at `offset` bytes (within the plan's staged bytes).
  at::Tensor piece_at(int64_t offset, const at::Tensor& like) const;
  // The buffer's first `bytes`, as bytes (at most the plan's staged bytes).
  at::Tensor first_bytes(int64_t bytes) const { return buffer_.narrow(0, 0, bytes); }

 private:
  // The room on this device now, the buffer held counted as free.
  StagingRoom measure(int64_t bytes, StagingConditions conditions) const;
  // Allocates `bytes` of device memory; false (and no buffer) when the device refuses.
  bool allocate(int64_t bytes);
  int64_t buffer_bytes() const { return buffer_.defined() ? buffer_.numel() : 0; }

  c10::Device device_;
  at::Tensor buffer_;  // uint8 on the device, from cudaMalloc (outside the caching allocator)
  std::string decision_;
};

}  // namespace triax::checkpoint
