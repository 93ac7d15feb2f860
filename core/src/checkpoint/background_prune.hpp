// The removal of old checkpoint folders after a save (checkpoints.keep_last, and the .partial
// folders of interrupted saves), on a thread of rank 0 so that the steps do not wait for it:
// deleting a checkpoint of tens of GB takes seconds. It starts once the save is committed, so
// `latest` already names the new step, and prune_checkpoints never removes the folder `latest`
// names: a crash during the removal leaves what it leaves during a synchronous one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <thread>

namespace triax::checkpoint {

class BackgroundPrune {
 public:
  // Starts removing what prune_checkpoints(root, keep_last, step) removes.
  BackgroundPrune(std::filesystem::path root, int64_t keep_last, int64_t step);
  ~BackgroundPrune();  // waits for the removal
  BackgroundPrune(const BackgroundPrune&) = delete;
  BackgroundPrune& operator=(const BackgroundPrune&) = delete;

  // Blocks until the removal is complete; returns how long it waited.
  double wait();

 private:
  void prune() const;  // the thread's work; a failure is logged (the next save's pruning retries)

  const std::filesystem::path root_;
  const int64_t keep_last_;
  const int64_t step_;
  std::thread thread_;
};

}  // namespace triax::checkpoint
