#include "async_save.hpp"

#include <chrono>

#include "triax/faults/fault_injection.hpp"
#include "triax/report/log.hpp"
#include "triax/report/metrics.hpp"

namespace triax::checkpoint {

AsyncSave::AsyncSave(SaveStrategySetup setup) : setup_(std::move(setup)) {}
AsyncSave::~AsyncSave() = default;

void AsyncSave::prepare() {
  const auto start = std::chrono::steady_clock::now();
  snapshot_ = std::make_unique<HostSnapshot>(setup_.device);
  snapshot_->prepare(setup_.live_contents());
  log::info("checkpoints.async_save: " + std::to_string(static_cast<double>(snapshot_->buffer_bytes()) / 1e9) +
            " GB of host memory for the copies of this rank's pieces" + (setup_.device.is_cuda() ? " (pinned)" : "") +
            ", allocated and touched in " +
            std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()) +
            " s before the first step");
}

void AsyncSave::save(SaveRequest request) {
  const int64_t step = request.metadata.step;
  const auto start = std::chrono::steady_clock::now();
  if (!snapshot_) snapshot_ = std::make_unique<HostSnapshot>(setup_.device);  // without prepare
  const std::filesystem::path partial = request.writer.begin(step);
  // The device's peak memory is the training's once a step ran in this process (staging needs it).
  const StagingConditions conditions{request.after_a_step, fault::armed("small_staging_room", setup_.world_rank, step)};
  RankContents copy = snapshot_->take(setup_.live_contents(), conditions);
  in_flight_ = std::make_unique<BackgroundSave>(std::move(request.writer), std::move(request.metadata), partial,
                                                *snapshot_, std::move(copy), request.resolved_config);
  snapshot_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::info("checkpoint: step " + std::to_string(step) + " copied into host memory in " +
            std::to_string(snapshot_seconds_) + " s (" +
            std::to_string(static_cast<double>(snapshot_->buffer_bytes()) / 1e9) +
            " GB of host buffers, reused from save to save" +
            (snapshot_->copy_path().empty() ? "" : "; " + snapshot_->copy_path()) +
            "); its files are written in the background");
}

void AsyncSave::before_optimizer_step() {
  if (in_flight_) snapshot_->before_optimizer_step();
}

void AsyncSave::commit_in_flight() {
  if (!in_flight_) return;
  const std::unique_ptr<BackgroundSave> save = std::move(in_flight_);  // finished or failed, never again
  const SaveResult result = setup_.commit(save->step(), [&] { return save->finish(); });
  record_cost(*save, result);
}

void AsyncSave::record_cost(const BackgroundSave& save, const SaveResult& result) {
  const CopyTimes copies = snapshot_->copy_times();
  const RankFileWrite& file = save.rank_file();
  cost_ = std::make_unique<SaveCost>();
  cost_->step = save.step();
  cost_->stall_seconds = snapshot_seconds_ + copies.stall + save.waited_seconds() + result.seconds;
  cost_->device_wait_seconds = copies.stall;
  cost_->staging_seconds = copies.device_copies;
  cost_->host_copy_seconds = copies.host_copy;
  cost_->write_seconds = file.seconds;
  const bool cuda = setup_.device.is_cuda();
  const double gigabytes = static_cast<double>(file.bytes) / 1e9;
  log::info("checkpoint: step " + std::to_string(save.step()) + " saved to " + result.folder.string() +
            "; its file written in the background in " + std::to_string(file.seconds) + " s (" +
            std::to_string(gigabytes) + " GB from this rank, " +
            std::to_string(file.seconds > 0 ? gigabytes / file.seconds : 0.0) + " GB/s); the training stalled " +
            std::to_string(cost_->stall_seconds) + " s (" + std::to_string(snapshot_seconds_) + " s to copy, " +
            (cuda ? std::to_string(copies.stall) + " s waiting for the copies on the device, " : "") +
            std::to_string(save.waited_seconds()) + " s waiting for the write, " + std::to_string(result.seconds) +
            " s to commit)" + (cuda ? "; " + copies.describe() : ""));
}

bool AsyncSave::take_cost(SaveCost& cost) {
  if (!cost_) return false;
  cost = *cost_;
  cost_.reset();
  return true;
}

SaveStrategyEntry async_save_strategy() {
  return {[](const CheckpointsConfig& checkpoints) { return checkpoints.async_save; },
          [](SaveStrategySetup setup) -> std::unique_ptr<SaveStrategy> {
            return std::make_unique<AsyncSave>(std::move(setup));
          }};
}

}  // namespace triax::checkpoint
