// A named range of work that profilers show: a LibTorch profiler (RecordFunction) range, which
// the profiler section's Chrome traces hold, and on CUDA builds an NVTX range, which Nsight
// Systems shows on the GPU timeline. Costs next to nothing when no profiler is listening.
#pragma once

#include <ATen/record_function.h>

#include <string>
#ifdef TRIAX_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace triax {

class TraceRange {
 public:
  explicit TraceRange(const std::string& name) : record_(at::RecordScope::USER_SCOPE) {
    if (record_.isActive()) record_.before(name);
#ifdef TRIAX_WITH_CUDA
    nvtxRangePushA(name.c_str());
#endif
  }
  ~TraceRange() {
#ifdef TRIAX_WITH_CUDA
    nvtxRangePop();
#endif
  }
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
  at::RecordFunction record_;
};

}  // namespace triax
