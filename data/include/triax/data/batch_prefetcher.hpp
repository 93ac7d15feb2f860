// Builds the next step's batch on a background thread while the current step runs: when the
// trainer asks for step s, the batch was (normally) built during step s - 1, and the build of
// step s + 1 starts at once. Batches are built on that one thread only, one at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace triax::data {

class BatchPrefetcher {
 public:
  using Build = std::function<at::Tensor(int64_t step)>;

  // Steps after `last_step` are never built ahead.
  BatchPrefetcher(Build build, int64_t last_step);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The batch of `step` (waits if still building; builds it if another step was prefetched).
  // An exception the build raised is rethrown here.
  at::Tensor get(int64_t step);
  // Seconds get() spent waiting so far: 0 when loading never stalled a step.
  double waited_seconds() const { return waited_seconds_; }

 private:
  void run();

  Build build_;
  int64_t last_step_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t wanted_ = 0;  // the step the worker is to build (0: none)
  int64_t built_ = 0;   // the step whose batch is in `batch_` (0: none)
  bool busy_ = false;
  bool stop_ = false;
  at::Tensor batch_;
  std::exception_ptr error_;
  double waited_seconds_ = 0;
  std::thread worker_;
};

}  // namespace triax::data
