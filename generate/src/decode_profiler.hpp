// `triax generate --profile FILE`: a LibTorch (Kineto) Chrome trace of a window of decoding
// steps, host and GPU (tools/device/step_profile.py FILE --steps N reads it: the time per step by
// kind of GPU work, and with --gaps where the GPU waited for the host). The first decoding steps
// are left out (allocator and library warm-up); the window is the next `steps` ones.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace triax::generation {

class DecodeProfiler {
 public:
  static constexpr int64_t kSkippedSteps = 3;

  // An empty path: off. `steps`: how many decoding steps the trace holds.
  DecodeProfiler(std::string path, const c10::Device& device, int64_t steps);
  ~DecodeProfiler();
  DecodeProfiler(const DecodeProfiler&) = delete;
  DecodeProfiler& operator=(const DecodeProfiler&) = delete;

  // Around decoding step `index` (0: the first step after the prefill).
  void before_step(int64_t index);
  void after_step(int64_t index);
  // Saves a trace still recording (generation ended inside the window).
  void finish();

 private:
  void save();

  std::string path_;
  bool cuda_ = false;
  int64_t steps_ = 0;
  int64_t recorded_ = 0;
  bool recording_ = false;
};

}  // namespace triax::generation
