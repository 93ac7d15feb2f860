// A copy in host memory of everything a rank saves (parameters, optimizer state, RNG states), for
// a checkpoint written in the background while training changes the live tensors. The copies lie
// in one allocation of exactly their bytes (pinned on a GPU run: pinning per tensor would round
// each up to a power of two), kept from save to save, so that the host memory a run adds is one
// checkpoint's bytes of this rank, allocated once.
//
// On a GPU the copies run on a side stream after the work already queued: take() returns at
// once, the next optimizer step waits for them on the device (before_optimizer_step), and the
// writing thread on the host (wait_until_copied). Where the device has room for a second copy
// beside the training's peak, the pieces go device-to-device into a staging buffer first
// (DeviceStaging): the optimizer step then waits only for those fast copies, and the staging
// buffer goes to host memory while training goes on.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "checkpoint/checkpoint_writer.hpp"

namespace triax::checkpoint {

class HostSnapshot {
 public:
  explicit HostSnapshot(c10::Device device);
  ~HostSnapshot();
  HostSnapshot(const HostSnapshot&) = delete;
  HostSnapshot& operator=(const HostSnapshot&) = delete;

  // The same contents, every tensor copied into this snapshot's buffers. The result points into
  // this object and stays valid until the next take(). `steps_measured`: a training step ran in
  // this process, so the device's peak memory is known (staging needs it).
  RankContents take(const RankContents& live, bool steps_measured);
  // How the last take's copies went on a GPU (staged in device memory or not, and why); empty on
  // a CPU run.
  const std::string& copy_path() const { return copy_path_; }
  // Allocates the copies' memory for contents like `live` ahead of the first take (pinning a
  // checkpoint's bytes, or faulting in its pages on a CPU run, takes seconds, which the first
  // save's step would otherwise stall for).
  void prepare(const RankContents& live) { reserve(bytes_needed(live)); }
  // The device's next work (the optimizer step) waits for the copies; nothing on a CPU run.
  void before_optimizer_step();
  // Blocks the calling thread until the copies are complete in host memory.
  void wait_until_copied();
  // The host memory the copies hold.
  int64_t buffer_bytes() const { return arena_.defined() ? arena_.numel() : 0; }

 private:
  struct CopyFence;  // the side stream, its events and the staging buffer, on a GPU run
  static int64_t bytes_needed(const RankContents& live);
  // The copies' allocation, grown to `bytes` when smaller; every page touched.
  void reserve(int64_t bytes);
  // On a GPU: the side stream waits for the queued work, and the staging decision is made.
  void begin_copies(int64_t bytes, bool steps_measured);
  // Every piece of `live` copied (or staged) at its place; the result points at the host copies.
  RankContents copy_pieces(const RankContents& live);
  // On a GPU: the events that the optimizer step and the writing thread wait for.
  void end_copies(int64_t bytes);
  // A copy of `source` at `offset` bytes into the allocation (through the staging buffer when
  // staging); returns the host copy.
  at::Tensor copy_at(int64_t offset, const at::Tensor& source);

  c10::Device device_;
  at::Tensor arena_;                        // bytes (uint8), every copy a view into it
  std::deque<NamedParameter> parameters_;      // what the last take() points at (stable addresses)
  std::unique_ptr<CopyFence> fence_;
  bool staging_ = false;  // the current take's pieces go through the staging buffer
  std::string copy_path_;
};

}  // namespace triax::checkpoint
