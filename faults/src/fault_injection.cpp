// TRIAX_FAULT, read afresh whenever its value changes (tests set it between runs in one process).
#include "triax/faults/fault_injection.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "triax/error.hpp"

namespace triax::fault {
namespace {

// The points of docs/reliability.md: where training and a checkpoint save can be killed, then
// the faults that change a value or fail an operation.
constexpr std::array<std::string_view, 22> kPoints = {
    "forward",         "backward",      "optimizer_step", "save_start",    "before_rank_file", "mid_rank_file",
    "before_rank_commit", "after_rank_file", "after_agreement", "before_rename", "after_rename", "after_latest",
    "mid_prune",       "after_prune",   "nan_loss",       "nan_grad",      "disk_full",        "error",
    "slow_forward",    "slow_write",    "slow_prune",    "small_staging_room"};

struct Fault {
  std::string point;
  std::optional<int> rank;
  std::optional<int64_t> first_step, last_step;

  bool matches(std::string_view p, int r, int64_t step) const {
    return point == p && (!rank || *rank == r) && (!first_step || (step >= *first_step && step <= *last_step));
  }
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

Fault parse_one(const std::string& text, const std::string& whole) {
  const std::vector<std::string> parts = split(text, ':');
  auto refuse = [&](const std::string& why) -> Error {
    return Error("TRIAX_FAULT='" + whole + "': " + why + " (expected <point>[:<rank>[:<step>|<first>-<last>]])");
  };
  if (parts.empty() || parts.size() > 3) throw refuse("'" + text + "' has " + std::to_string(parts.size()) + " parts");
  Fault fault;
  fault.point = parts[0];
  if (std::find(kPoints.begin(), kPoints.end(), fault.point) == kPoints.end()) {
    std::string known;
    for (std::string_view p : kPoints) known += (known.empty() ? "" : ", ") + std::string(p);
    throw refuse("unknown point '" + fault.point + "'; the points are " + known);
  }
  try {
    if (parts.size() > 1 && parts[1] != "*" && !parts[1].empty()) fault.rank = std::stoi(parts[1]);
    if (parts.size() > 2 && parts[2] != "*" && !parts[2].empty()) {
      const size_t dash = parts[2].find('-', 1);
      fault.first_step = std::stoll(parts[2].substr(0, dash));
      fault.last_step = dash == std::string::npos ? *fault.first_step : std::stoll(parts[2].substr(dash + 1));
    }
  } catch (const std::exception&) {
    throw refuse("'" + text + "' holds a rank or step that is not a number");
  }
  return fault;
}

// The faults of the current value of TRIAX_FAULT, parsed once per value.
std::vector<Fault> current_faults() {
  static std::mutex mutex;
  static std::string parsed_value;
  static std::vector<Fault> faults;
  const char* raw = std::getenv("TRIAX_FAULT");
  const std::string value = raw == nullptr ? "" : raw;
  std::lock_guard<std::mutex> lock(mutex);
  if (value != parsed_value) {
    std::vector<Fault> fresh;
    for (const std::string& item : split(value, ','))
      if (!item.empty()) fresh.push_back(parse_one(item, value));
    faults = std::move(fresh);
    parsed_value = value;
  }
  return faults;
}

}  // namespace

bool armed(std::string_view point, int rank, int64_t step) {
  if (std::getenv("TRIAX_FAULT") == nullptr) return false;  // the usual case: nothing to parse
  for (const Fault& fault : current_faults())
    if (fault.matches(point, rank, step)) return true;
  return false;
}

void kill_if_armed(std::string_view point, int rank, int64_t step) {
  if (!armed(point, rank, step)) return;
  // The wall-clock time lets a test measure how long the survivors take to leave.
  const auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char when[32];
  std::snprintf(when, sizeof when, "%.3f", now);
  const std::string line = "TRIAX_FAULT: killing rank " + std::to_string(rank) + " at '" + std::string(point) +
                           "' of step " + std::to_string(step) + " (unix time " + when + ")\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
  std::raise(SIGKILL);
}

}  // namespace triax::fault
