#include "triax/core/checkpoint/checkpoint_folder.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/faults/fault_injection.hpp"
#include "triax/interop/durable_file.hpp"

namespace triax::checkpoint {
namespace {

std::string padded(int64_t value, int width) {
  std::string digits = std::to_string(value);
  return std::string(static_cast<size_t>(std::max<int>(0, width - static_cast<int>(digits.size()))), '0') + digits;
}

std::optional<int64_t> step_of(const std::string& name, const std::regex& pattern) {
  std::smatch match;
  if (!std::regex_match(name, match, pattern)) return std::nullopt;
  return std::stoll(match[1].str());
}

const std::regex& complete_pattern() {
  static const std::regex pattern("step_([0-9]+)");
  return pattern;
}

const std::regex& partial_pattern() {
  static const std::regex pattern("\\.step_([0-9]+)\\.partial");
  return pattern;
}

// A step folder being removed: hidden under this name first, so that a crash half-way through
// the removal never leaves a part of a checkpoint under a final name.
const std::regex& pruned_pattern() {
  static const std::regex pattern("\\.step_([0-9]+)\\.pruned");
  return pattern;
}

// Renames `folder` out of sight (durably), then removes its files one by one.
bool remove_out_of_sight(const fs::path& folder, int64_t current_step) {
  std::error_code ec;
  const fs::path hidden = folder.parent_path() / ("." + folder.filename().string() + ".pruned");
  fs::remove_all(hidden, ec);
  fs::rename(folder, hidden, ec);
  if (ec) return false;
  sync_path(folder.parent_path());
  if (fault::armed("slow_prune", 0, current_step)) std::this_thread::sleep_for(fault::kSlowPruneDelay);
  bool first = true;
  for (const auto& entry : fs::directory_iterator(hidden, ec)) {
    fs::remove_all(entry.path(), ec);
    if (first) fault::kill_if_armed("mid_prune", 0, current_step);  // rank 0 prunes
    first = false;
  }
  fs::remove_all(hidden, ec);
  return !ec;
}

}  // namespace

std::string step_folder_name(int64_t step) { return "step_" + padded(step, 8); }
std::string partial_folder_name(int64_t step) { return "." + step_folder_name(step) + ".partial"; }
std::string rank_file_name(int rank) { return "rank_" + padded(rank, 5) + ".h5"; }

std::optional<fs::path> latest_checkpoint(const fs::path& root) {
  std::ifstream in(root / kLatestFile);
  if (!in) return std::nullopt;
  std::string name;
  std::getline(in, name);
  if (name.empty()) return std::nullopt;
  return root / name;
}

void point_latest(const fs::path& root, const fs::path& step_folder) {
  write_file_durably(root / kLatestFile, step_folder.filename().string() + "\n");
}

fs::path resolve_checkpoint(const std::string& path) {
  const fs::path given(path);
  std::error_code ec;
  if (!fs::is_directory(given, ec))
    throw CheckpointError("checkpoint " + path + ": no such folder (give a step folder, or its parent holding '" +
                          kLatestFile + "')");
  if (fs::exists(given / kMetadataFile)) return given;
  if (fs::exists(given / kLatestFile)) {
    std::optional<fs::path> latest = latest_checkpoint(given);
    if (!latest) throw CheckpointError("checkpoint " + path + ": '" + kLatestFile + "' is empty");
    if (!fs::exists(*latest / kMetadataFile))
      throw CheckpointError("checkpoint " + path + ": '" + kLatestFile + "' names " + latest->string() +
                            ", which is not a complete checkpoint (no " + kMetadataFile + ")");
    return *latest;
  }
  const auto steps = list_checkpoints(given);
  throw CheckpointError("checkpoint " + path + ": neither a step folder (no " + kMetadataFile + ") nor a run folder (no '" +
                        kLatestFile + "')" +
                        (steps.empty() ? std::string() : "; it holds " + steps.back().second.filename().string()));
}

std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const fs::path& root) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory()) continue;
    if (auto step = step_of(entry.path().filename().string(), complete_pattern()))
      if (fs::exists(entry.path() / kMetadataFile)) out.emplace_back(*step, entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> prune_checkpoints(const fs::path& root, int64_t keep_last, int64_t current_step) {
  std::vector<fs::path> removed;
  std::error_code ec;
  const std::optional<fs::path> latest = latest_checkpoint(root);
  if (keep_last > 0) {
    auto complete = list_checkpoints(root);
    const int64_t excess = static_cast<int64_t>(complete.size()) - keep_last;
    for (int64_t i = 0; i < excess; ++i) {
      const fs::path& folder = complete[static_cast<size_t>(i)].second;
      if (latest && fs::equivalent(folder, *latest, ec)) continue;
      if (remove_out_of_sight(folder, current_step)) removed.push_back(folder);
    }
  }
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    auto step = step_of(name, partial_pattern());
    if (!step) step = step_of(name, pruned_pattern());  // left by a crash during an earlier pruning
    if (step && *step <= current_step) {
      fs::remove_all(entry.path(), ec);
      if (!ec) removed.push_back(entry.path());
    }
  }
  if (!removed.empty()) sync_path(root);
  return removed;
}

}  // namespace triax::checkpoint
