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
// buffer goes to host memory while training goes on. Where only some pieces fit, the others are
// copied to the host directly, queued first so that they overlap the next forward and backward.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "triax/core/checkpoint/checkpoint_writer.hpp"
#include "device_staging.hpp"

namespace triax::checkpoint {

// What a take's copies cost on the device, in seconds, measured by CUDA events (zero on a CPU
// run): what the next optimizer step waits for, and what runs beside the next steps.
struct CopyTimes {
  double device_copies = 0.0;  // the direct copies and the staging copies, which the optimizer waits for
  double host_copy = 0.0;      // the staging buffer to host memory, beside the next steps
  double stall = 0.0;          // how long the training stream waited for the copies before the next optimizer step
  bool stall_measured = false;  // an optimizer step came after the take (not when the run ended first)
  int64_t allocator_retries = 0;  // the caching allocator's out-of-memory retries since the take (freeing its cache)
  // "the copies took 0.021 s on the device, the optimizer step waited 0.000 s for them, ...".
  std::string describe() const;
};

class HostSnapshot {
 public:
  explicit HostSnapshot(c10::Device device);
  ~HostSnapshot();
  HostSnapshot(const HostSnapshot&) = delete;
  HostSnapshot& operator=(const HostSnapshot&) = delete;

  // The same contents, every tensor copied into this snapshot's buffers. The result points into
  // this object and stays valid until the next take(). `conditions`: what staging needs to know.
  RankContents take(const RankContents& live, StagingConditions conditions);
  // How the last take's copies went on a GPU (staged in device memory or not, and why); empty on
  // a CPU run.
  const std::string& copy_path() const { return copy_path_; }
  // Allocates the copies' memory for contents like `live` ahead of the first take (pinning a
  // checkpoint's bytes, or faulting in its pages on a CPU run, takes seconds, which the first
  // save's step would otherwise stall for).
  void prepare(const RankContents& live);
  // The device's next work (the optimizer step) waits for the copies; nothing on a CPU run.
  void before_optimizer_step();
  // Blocks the calling thread until the copies are complete in host memory.
  void wait_until_copied();
  // The last take's times: waits for its copies and for the optimizer step's wait on them.
  CopyTimes copy_times();
  // The host memory the copies hold.
  int64_t buffer_bytes() const { return arena_.defined() ? arena_.numel() : 0; }

 private:
  struct CopyFence;  // the side stream, its events and the staging buffer, on a GPU run
  struct PieceCopy;  // one piece: its live tensor, its host copy, and whether it is staged
  // The bytes each piece takes in the allocation, in the order place_pieces meets them.
  static std::vector<int64_t> piece_sizes(const RankContents& live);
  // The copies' allocation, grown to `bytes` when smaller; every page touched.
  void reserve(int64_t bytes);
  // On a GPU: the side stream waits for the queued work, and the staging decision is made.
  StagingPlan begin_copies(const std::vector<int64_t>& sizes, StagingConditions conditions);
  // The host copies of `live`'s pieces at their places (the staged pieces first, in the staging
  // buffer's order), and the copies to make, in `copies`; the result points at the host copies.
  RankContents place_pieces(const RankContents& live, const StagingPlan& plan, std::vector<PieceCopy>& copies);
  // The direct copies first, then the device-to-device ones into the staging buffer.
  void issue_copies(const std::vector<PieceCopy>& copies);
  // On a GPU: the staged pieces' device-to-device copies in one kernel launch (piece_copies.hpp);
  // the pieces it cannot take (not contiguous) are left to copy_().
  std::vector<PieceCopy> copy_staged_in_one_launch(const std::vector<PieceCopy>& staged);
  // On a GPU: the events that the optimizer step and the writing thread wait for, and the copy of
  // the staging buffer's `staged_bytes` to the host between them.
  void end_copies(int64_t staged_bytes);

  c10::Device device_;
  at::Tensor arena_;                        // bytes (uint8), every copy a view into it
  std::deque<NamedParameter> parameters_;      // what the last take() points at (stable addresses)
  std::unique_ptr<CopyFence> fence_;
  std::string copy_path_;
};

}  // namespace triax::checkpoint
