// Where checkpoints live and how they become visible.
//
//   <checkpoints_path>/
//     latest                   "step_00000100": the newest complete checkpoint
//     step_00000100/           one complete checkpoint (see docs/checkpoint-format.md)
//     .step_00000150.partial/  a save in progress, or one a crash interrupted
//
// A save writes into the .partial folder; the folder is renamed to its final name only once every
// rank's file is complete and durable, and `latest` moves after that. Renames and fsyncs
// (triax/interop/durable_file.hpp) make each step atomic: a reader never sees a half-written checkpoint
// under a final name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace triax::checkpoint {

namespace fs = std::filesystem;

std::string step_folder_name(int64_t step);     // "step_00000100"
std::string partial_folder_name(int64_t step);  // ".step_00000100.partial"
std::string rank_file_name(int rank);           // "rank_00003.h5"
inline constexpr const char* kMetadataFile = "metadata.yaml";
inline constexpr const char* kConfigFile = "config.yaml";
inline constexpr const char* kLatestFile = "latest";

// The step folder `latest` names, if any.
std::optional<fs::path> latest_checkpoint(const fs::path& root);
// Makes `step_folder` (inside root) the latest, atomically.
void point_latest(const fs::path& root, const fs::path& step_folder);

// A step folder given directly, or the one `latest` names inside a parent folder. Errors say
// what was found instead (nothing there, no latest, latest naming a missing folder).
fs::path resolve_checkpoint(const std::string& path);

// Complete step folders of root, oldest first.
std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const fs::path& root);

// Removes complete checkpoints beyond the newest `keep_last` (never the one `latest` names) and
// partial folders of steps not newer than `current_step` (left by interrupted saves). A folder is
// renamed out of sight before its files go, so a crash mid-way leaves no part of a checkpoint
// under a final name (the next pruning finishes the removal). Returns the folders removed.
std::vector<fs::path> prune_checkpoints(const fs::path& root, int64_t keep_last, int64_t current_step);

}  // namespace triax::checkpoint
