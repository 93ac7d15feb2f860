// profiler: nanotron's keys for a LibTorch profiler trace of chosen steps (see ProfilerConfig).
#include "config_sections.hpp"

namespace triax::config {

std::optional<ProfilerConfig> read_profiler(ConfigReader& root) {
  std::optional<ConfigReader> section = root.optional_section("profiler");
  if (!section) return std::nullopt;  // null, as nanotron writes it: no profiling
  ConfigReader& r = *section;
  ProfilerConfig p;
  ProfilerOptions& o = p.options;
  o.export_path = r.required<std::string>("profiler_export_path");
  if (o.export_path.empty()) r.fail("profiler_export_path", "must name a folder for the traces");
  o.wait = int_or(r, "wait", o.wait, 0);
  o.warmup = int_or(r, "warmup", o.warmup, 0);
  o.active = int_or(r, "active", o.active, 1);
  o.repeat = int_or(r, "repeat", o.repeat, 0);
  o.skip_first = int_or(r, "skip_first", o.skip_first, 0);
  o.record_shapes = r.get<bool>("record_shapes", o.record_shapes);
  o.profile_memory = r.get<bool>("profile_memory", o.profile_memory);
  o.with_stack = r.get<bool>("with_stack", o.with_stack);
  p.export_chrome_trace = r.get<bool>("export_chrome_trace", p.export_chrome_trace);
  r.finish();
  return p;
}

}  // namespace triax::config
