// A copy in host memory of everything a rank saves (parameters, optimizer state, RNG states), for
// a checkpoint written in the background while training changes the live tensors. The buffers
// are kept from save to save (pinned on a GPU run), so that the host memory a run adds is one
// checkpoint's bytes of this rank, allocated once.
//
// On a GPU the copies run on a side stream after the work already queued: take() returns at
// once, the next optimizer step waits for them on the device (before_optimizer_step), and the
// writing thread on the host (wait_until_copied).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <deque>
#include <map>
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
  // this object and stays valid until the next take().
  RankContents take(const RankContents& live);
  // The device's next work (the optimizer step) waits for the copies; nothing on a CPU run.
  void before_optimizer_step();
  // Blocks the calling thread until the copies are complete in host memory.
  void wait_until_copied();
  // The host memory the buffers hold.
  int64_t buffer_bytes() const;

 private:
  struct CopyFence;  // the side stream's event, on a GPU run
  at::Tensor copy_into_buffer(const std::string& key, const at::Tensor& source);

  c10::Device device_;
  std::map<std::string, at::Tensor> buffers_;  // by dataset name, reused when shape and dtype match
  std::deque<NamedParameter> parameters_;      // what the last take() points at (stable addresses)
  std::unique_ptr<CopyFence> fence_;
};

}  // namespace triax::checkpoint
