// One checkpoint save whose rank file is written by a background thread (checkpoints.async_save)
// while training goes on. The thread does no collective: it writes, checksums and fsyncs this
// rank's file into the step's .partial folder (rank 0 also config.yaml and metadata.yaml). The
// ranks' agreement and rank 0's commit (rename, `latest`) run on the training thread, at a step
// boundary every rank reaches together, so the folder becomes `latest` only once every rank's
// file is durable, exactly as after a synchronous save.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "triax/core/checkpoint/checkpoint_writer.hpp"
#include "host_snapshot.hpp"

namespace triax::checkpoint {

class BackgroundSave {
 public:
  // Starts the thread that writes `contents` (held by `snapshot`, which must stay untouched until
  // finish) into `partial`, which writer.begin prepared.
  BackgroundSave(CheckpointWriter writer, CheckpointMetadata metadata, std::filesystem::path partial,
                 HostSnapshot& snapshot, RankContents contents, std::string resolved_config);
  ~BackgroundSave();  // waits for the thread (a run stopped by another error)
  BackgroundSave(const BackgroundSave&) = delete;
  BackgroundSave& operator=(const BackgroundSave&) = delete;

  // Whether this rank's file is written (or failed).
  bool written() const { return written_.load(std::memory_order_acquire); }
  int64_t step() const { return metadata_.step; }
  // Collective over the world: waits for this rank's file, then agreement and commit. Throws
  // CheckpointError on every rank when a rank's write failed, naming that rank's file. The
  // result's seconds are the commit's, without the wait.
  SaveResult finish();
  // How long finish waited for this rank's file.
  double waited_seconds() const { return waited_seconds_; }
  // This rank's write, once finish returned.
  const RankFileWrite& rank_file() const { return rank_file_; }

 private:
  void write();  // the thread's work

  CheckpointWriter writer_;
  const CheckpointMetadata metadata_;
  const std::filesystem::path partial_;
  HostSnapshot& snapshot_;
  const RankContents contents_;
  const std::string resolved_config_;
  RankFileWrite rank_file_;
  std::atomic<bool> written_{false};
  double waited_seconds_ = 0.0;
  std::thread thread_;
};

}  // namespace triax::checkpoint
