#include "triax/report/progress.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "triax/report/log.hpp"

namespace triax {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const auto total = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream out;
  out << total / 3600 << ":" << std::setw(2) << std::setfill('0') << (total / 60) % 60 << ":" << std::setw(2)
      << std::setfill('0') << total % 60;
  return out.str();
}

ProgressMeter::ProgressMeter(std::string what, int64_t total, Unit unit)
    : what_(std::move(what)), total_(total), unit_(unit) {}

std::string ProgressMeter::amount_text(double amount) const {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  if (unit_ == Unit::items)
    out << std::setprecision(0) << amount;
  else if (amount >= 1e9)
    out << amount / 1e9 << " GB";
  else
    out << amount / 1e6 << " MB";
  return out.str();
}

void ProgressMeter::advance(int64_t amount) {
  done_ += amount;
  if (!log::progress_enabled()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - drawn_ < std::chrono::milliseconds(100) && done_ < total_) return;
  drawn_ = now;
  const double seconds = seconds_since(start_);
  const double rate = seconds > 0 ? static_cast<double>(done_) / seconds : 0.0;
  std::ostringstream line;
  line << what_ << ": " << amount_text(static_cast<double>(done_)) << " of "
       << amount_text(static_cast<double>(total_));
  if (total_ > 0) line << " (" << std::fixed << std::setprecision(0) << 100.0 * done_ / total_ << "%)";
  line << ", " << amount_text(rate) << (unit_ == Unit::bytes ? "/s" : " per s");
  if (rate > 0) line << ", eta " << clock_text(static_cast<double>(total_ - done_) / rate);
  log::progress(line.str());
}

void ProgressMeter::finish() {
  if (finished_) return;
  finished_ = true;
  log::end_progress();
  const double seconds = seconds_since(start_);
  std::ostringstream line;
  line << what_ << ": " << amount_text(static_cast<double>(done_)) << " in " << std::fixed << std::setprecision(2)
       << seconds << " s";
  if (seconds > 0)
    line << " (" << amount_text(static_cast<double>(done_) / seconds) << (unit_ == Unit::bytes ? "/s)" : " per s)");
  log::info(line.str());
}

}  // namespace triax
