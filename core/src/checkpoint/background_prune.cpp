#include "checkpoint/background_prune.hpp"

#include <chrono>
#include <exception>
#include <string>

#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "triax/faults/fault_injection.hpp"
#include "triax/report/log.hpp"

namespace triax::checkpoint {

BackgroundPrune::BackgroundPrune(std::filesystem::path root, int64_t keep_last, int64_t step)
    : root_(std::move(root)), keep_last_(keep_last), step_(step), thread_(&BackgroundPrune::prune, this) {}

BackgroundPrune::~BackgroundPrune() { wait(); }

double BackgroundPrune::wait() {
  const auto start = std::chrono::steady_clock::now();
  if (thread_.joinable()) thread_.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BackgroundPrune::prune() const {
  const auto start = std::chrono::steady_clock::now();
  try {
    for (const auto& removed : prune_checkpoints(root_, keep_last_, step_))
      log::info("checkpoint: removed " + removed.string() + " (checkpoints.keep_last = " +
                std::to_string(keep_last_) + "), off the training thread, " +
                std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()) +
                " s after the commit of step " + std::to_string(step_));
  } catch (const std::exception& e) {
    // Step `step_` is complete and latest: a folder left behind costs disk space, not safety.
    log::warning("checkpoint: removing old checkpoints after step " + std::to_string(step_) + " failed: " + e.what() +
                 " (the next save's pruning tries again)");
  }
  fault::kill_if_armed("after_prune", 0, step_);
}

}  // namespace triax::checkpoint
