// A CUDA graph of work that repeats every step with the same shapes at the same addresses
// (general.cuda_graphs): recorded once on a side stream, then launched as one unit, which removes
// the host's per-kernel launch cost and the gaps between kernels. The memory the recorded work
// allocates comes from the graph's private pool and stays reserved for its replays.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace triax {

class CudaStepGraph {
 public:
  // Refused (triax::Error) for a device that is not CUDA or in a build without CUDA.
  explicit CudaStepGraph(const c10::Device& device);
  ~CudaStepGraph();
  CudaStepGraph(const CudaStepGraph&) = delete;
  CudaStepGraph& operator=(const CudaStepGraph&) = delete;

  // Records `work` (the device runs none of it), then replays the graph once, so that this step's
  // work is done as well. Whatever `work` throws ends the capture and is thrown again.
  void capture(const std::function<void()>& work);
  // Launches the recorded work on the current stream, after what is queued there.
  void replay();
  bool captured() const { return captured_; }
  // Device memory the capture reserved for the graph's private pool, and all the caching allocator
  // held right after the capture.
  int64_t pool_bytes() const { return pool_bytes_; }
  int64_t reserved_bytes() const { return reserved_bytes_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool captured_ = false;
  int64_t pool_bytes_ = 0;
  int64_t reserved_bytes_ = 0;
};

}  // namespace triax
