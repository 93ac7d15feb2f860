// The only translation unit that sees spdlog (and Debian's fmt); no LibTorch header here.
#include "triax/report/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <stdexcept>

namespace triax::log {
namespace {

std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto created = std::make_shared<spdlog::logger>("triax", sink);
    created->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
    created->set_level(spdlog::level::info);
    created->flush_on(spdlog::level::info);
    return created;
  }();
  return instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::debug:
      return spdlog::level::debug;
    case Level::info:
      return spdlog::level::info;
    case Level::warning:
      return spdlog::level::warn;
    case Level::error:
      return spdlog::level::err;
    case Level::off:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

struct LiveLine {
  std::mutex mutex;
  bool enabled = isatty(STDERR_FILENO) != 0;
  bool shown = false;
  void erase() {
    if (!shown) return;
    std::fputs("\r\033[K", stderr);  // back to the line's start, clear to its end
    shown = false;
  }
};

LiveLine& live_line() {
  static LiveLine line;
  return line;
}

}  // namespace

Level parse_level(const std::string& name) {
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warning") return Level::warning;
  if (name == "error" || name == "critical") return Level::error;
  if (name == "passive") return Level::off;
  throw std::invalid_argument("unknown log level '" + name + "'");
}

void configure(int rank, int world_size, Level level, Level replica_level) {
  auto& log = logger();
  if (world_size > 1) log->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] [rank " + std::to_string(rank) + "] %v");
  log->set_level(to_spdlog(rank == 0 ? level : replica_level));
  if (rank != 0) set_progress_mode(ProgressMode::never);  // one live line per job: rank 0's
}

void write(Level level, const std::string& message) {
  LiveLine& line = live_line();
  std::lock_guard<std::mutex> lock(line.mutex);
  line.erase();
  logger()->log(to_spdlog(level), message);
}

void set_progress_mode(ProgressMode mode) {
  LiveLine& line = live_line();
  std::lock_guard<std::mutex> lock(line.mutex);
  line.enabled = mode == ProgressMode::always || (mode == ProgressMode::automatic && isatty(STDERR_FILENO) != 0);
}

bool progress_enabled() {
  LiveLine& line = live_line();
  std::lock_guard<std::mutex> lock(line.mutex);
  return line.enabled;
}

void progress(const std::string& text) {
  LiveLine& line = live_line();
  std::lock_guard<std::mutex> lock(line.mutex);
  if (!line.enabled) return;
  line.erase();
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  line.shown = true;
}

void end_progress() {
  LiveLine& line = live_line();
  std::lock_guard<std::mutex> lock(line.mutex);
  line.erase();
  std::fflush(stderr);
}
void debug(const std::string& message) { write(Level::debug, message); }
void info(const std::string& message) { write(Level::info, message); }
void warning(const std::string& message) { write(Level::warning, message); }
void error(const std::string& message) { write(Level::error, message); }

}  // namespace triax::log
