#include "background_save.hpp"

#include <chrono>

#include "triax/core/checkpoint/checkpoint_folder.hpp"

namespace triax::checkpoint {

BackgroundSave::BackgroundSave(CheckpointWriter writer, CheckpointMetadata metadata, std::filesystem::path partial,
                               HostSnapshot& snapshot, RankContents contents, std::string resolved_config)
    : writer_(std::move(writer)),
      metadata_(std::move(metadata)),
      partial_(std::move(partial)),
      snapshot_(snapshot),
      contents_(std::move(contents)),
      resolved_config_(std::move(resolved_config)),
      thread_(&BackgroundSave::write, this) {}

BackgroundSave::~BackgroundSave() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundSave::write() {
  const auto start = std::chrono::steady_clock::now();
  try {
    snapshot_.wait_until_copied();
    rank_file_ = writer_.write_own_file(partial_, contents_, metadata_.step);
    if (rank_file_.failure.empty()) writer_.write_folder_files(metadata_, partial_, resolved_config_);
  } catch (const std::exception& e) {  // write_own_file reports its own failures; these are the others'
    rank_file_.failure = e.what();
  }
  // The write's duration includes waiting for the device-to-host copies.
  rank_file_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  written_.store(true, std::memory_order_release);
}

SaveResult BackgroundSave::finish() {
  const auto waiting = std::chrono::steady_clock::now();
  if (thread_.joinable()) thread_.join();
  const auto start = std::chrono::steady_clock::now();
  waited_seconds_ = std::chrono::duration<double>(start - waiting).count();
  writer_.conclude(metadata_, partial_, rank_file_, std::nullopt);
  SaveResult result;
  result.folder = partial_.parent_path() / step_folder_name(metadata_.step);
  result.bytes_written = rank_file_.bytes;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace triax::checkpoint
