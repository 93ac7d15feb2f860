// A buffer in spare device memory through which an asynchronous save's copies pass on a GPU: the
// pieces are copied device-to-device into it (fast: the next optimizer step waits only for
// these), then the whole buffer goes to the pinned host buffer in one copy while training goes
// on. The buffer is allocated outside the caching allocator, once, and reused from save to save;
// it is used only where the device has room for it beside the training's own peak (StagingRoom).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace triax::checkpoint {

// The device memory a save may take for staging, all in bytes.
struct StagingRoom {
  int64_t needed = 0;             // one checkpoint's bytes of this rank (its host buffer's size)
  int64_t total = 0;              // the device's memory
  int64_t peak_reserved = 0;      // the caching allocator's peak reserved bytes over the steps so far
  int64_t outside_allocator = 0;  // held outside the allocator (CUDA context, communication buffers)
  int64_t margin = 0;             // kept free for the allocator's growth after the measured steps
  bool steps_measured = false;    // a step ran in this process, so the peak is the training's

  int64_t spare() const { return total - peak_reserved - outside_allocator - margin; }
  bool fits() const { return steps_measured && needed <= spare(); }
  // "24.0 GB needed, 30.1 GB spare (80.0 GB of device memory, the steps' peak 45.2 GB reserved, ...)".
  std::string describe() const;
};

// What StagingRoom keeps free: 2 GiB, for the caching allocator's peak to grow a little after the
// steps it was measured on (fragmentation, a validation pass) without an out-of-memory error.
inline constexpr int64_t kStagingMargin = int64_t{2} << 30;

class DeviceStaging {
 public:
  explicit DeviceStaging(c10::Device device) : device_(device) {}
  ~DeviceStaging() = default;
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // Whether this save stages `bytes` through the buffer: only on a CUDA device with room for them
  // (StagingRoom), then holding a buffer of at least `bytes`; a buffer that no longer fits is
  // freed. decision() says which and why.
  bool prepare(int64_t bytes, bool steps_measured);
  const std::string& decision() const { return decision_; }
  // The buffer's `like`-shaped piece at `offset` bytes (after prepare returned true).
  at::Tensor piece_at(int64_t offset, const at::Tensor& like) const;
  // The buffer's first `bytes`, as bytes (after prepare returned true).
  at::Tensor first_bytes(int64_t bytes) const { return buffer_.narrow(0, 0, bytes); }

 private:
  // The room on this device now, the buffer held counted as free.
  StagingRoom measure(int64_t bytes, bool steps_measured) const;
  // Allocates `bytes` of device memory; false (and no buffer) when the device refuses.
  bool allocate(int64_t bytes);
  int64_t buffer_bytes() const { return buffer_.defined() ? buffer_.numel() : 0; }

  c10::Device device_;
  at::Tensor buffer_;  // uint8 on the device, from cudaMalloc (outside the caching allocator)
  std::string decision_;
};

}  // namespace triax::checkpoint
