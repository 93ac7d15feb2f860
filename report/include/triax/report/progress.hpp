// Progress of long work with sizes (loading a checkpoint, converting one): a live line on a
// terminal ("loading checkpoint: 120.0 MB of 400.0 MB (30%), 52.1 MB/s, eta 0:00:05"), redrawn
// at most ten times a second, and one log line with the total and the rate when done.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace triax {

class ProgressMeter {
 public:
  enum class Unit { bytes, items };
  ProgressMeter(std::string what, int64_t total, Unit unit = Unit::bytes);
  void advance(int64_t amount);
  // Erases the live line and logs "WHAT: TOTAL in S s (RATE)". Called at most once.
  void finish();

 private:
  std::string amount_text(double amount) const;

  std::string what_;
  int64_t total_;
  Unit unit_;
  int64_t done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point drawn_ = start_;
  bool finished_ = false;
};

// "H:MM:SS", as the training log writes durations.
std::string clock_text(double seconds);

}  // namespace triax
