// Logging facade. spdlog lives only in log.cpp: it is built against Debian's fmt, which must
// never meet the fmt that LibTorch ships, so this header includes neither.
#pragma once

#include <string>

namespace triax::log {

enum class Level { debug = 0, info = 1, warning = 2, error = 3, off = 4 };

// Parses nanotron's level names: debug, info, warning, error, critical, passive (= off).
Level parse_level(const std::string& name);

// Every line is prefixed with the rank when the world has more than one process; ranks other
// than 0 log at `replica_level`.
void configure(int rank, int world_size, Level level, Level replica_level);

void debug(const std::string& message);
void info(const std::string& message);
void warning(const std::string& message);
void error(const std::string& message);
void write(Level level, const std::string& message);

// One live progress line on stderr, redrawn in place (carriage return) and erased before the next
// log line, so that it never mixes with the log. Drawn only when enabled: by default when stderr
// is a terminal (a file or a pipe gets none).
enum class ProgressMode { automatic, always, never };
void set_progress_mode(ProgressMode mode);
bool progress_enabled();
void progress(const std::string& line);
void end_progress();  // erases the live line, if any

}  // namespace triax::log
