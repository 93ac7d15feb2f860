// Bytes of CPU tensors allocated and not yet freed while the counter is installed on this thread:
// c10's CPU allocator reports every allocation and free to the thread's memory reporter (the hook
// the profiler uses), so this counts what a graph keeps, whatever kept it. Install it with
//   auto counter = std::make_shared<LiveCpuBytes>();
//   c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, counter);
#pragma once

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <cstdint>

class LiveCpuBytes : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t bytes, size_t, size_t, c10::Device) override { live += bytes; }
  bool memoryProfilingEnabled() const override { return true; }
  int64_t live = 0;
};
