// The step profiler's options (step_profiler.hpp), a plain struct: the config's profiler section
// holds one (triax/config/train_config.hpp), so that the keys are read into it directly.
#pragma once

#include <cstdint>
#include <string>

namespace triax {

// Which steps are traced and what a trace records.
struct ProfilerOptions {
  std::string export_path;  // folder of the traces (*.pt.trace.json)
  std::string key;          // the config file and key that chose the folder, named in errors
  int64_t wait = 1;
  int64_t warmup = 1;
  int64_t active = 1;
  int64_t repeat = 1;  // cycles; 0: until the end of the run
  int64_t skip_first = 3;
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = true;
};

}  // namespace triax
