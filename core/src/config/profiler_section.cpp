// profiler: nanotron's keys for a LibTorch profiler trace of chosen steps (see ProfilerConfig).
#include "config/config_sections.hpp"

namespace triax::config {

std::optional<ProfilerConfig> read_profiler(ConfigReader& root) {
  std::optional<ConfigReader> section = root.optional_section("profiler");
  if (!section) return std::nullopt;  // null, as nanotron writes it: no profiling
  ConfigReader& r = *section;
  ProfilerConfig p;
  p.profiler_export_path = r.required<std::string>("profiler_export_path");
  if (p.profiler_export_path.empty()) r.fail("profiler_export_path", "must name a folder for the traces");
  p.wait = int_or(r, "wait", p.wait, 0);
  p.warmup = int_or(r, "warmup", p.warmup, 0);
  p.active = int_or(r, "active", p.active, 1);
  p.repeat = int_or(r, "repeat", p.repeat, 0);
  p.skip_first = int_or(r, "skip_first", p.skip_first, 0);
  p.record_shapes = r.get<bool>("record_shapes", p.record_shapes);
  p.profile_memory = r.get<bool>("profile_memory", p.profile_memory);
  p.with_stack = r.get<bool>("with_stack", p.with_stack);
  p.export_chrome_trace = r.get<bool>("export_chrome_trace", p.export_chrome_trace);
  r.finish();
  return p;
}

}  // namespace triax::config
