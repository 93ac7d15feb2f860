// logging: log levels, the step-info interval, the per-device peak that MFU is measured against,
// TensorBoard events and the live progress line.
#include "config_sections.hpp"

namespace triax::config {

LoggingConfig read_logging(ConfigReader& root) {
  ConfigReader r = section_or_empty(root, "logging");
  LoggingConfig l;
  l.log_level = r.choice("log_level", {"debug", "info", "warning", "error", "critical", "passive"}, l.log_level);
  l.log_level_replica =
      r.choice("log_level_replica", {"debug", "info", "warning", "error", "critical", "passive"}, l.log_level_replica);
  l.iteration_step_info_interval = int_or(r, "iteration_step_info_interval", l.iteration_step_info_interval, 1);
  l.peak_tflops = r.optional<double>("peak_tflops");
  if (l.peak_tflops && *l.peak_tflops <= 0)
    r.fail("peak_tflops", "must be > 0 (or null for the device's known peak), got " + number(*l.peak_tflops));
  l.tensorboard = r.get<bool>("tensorboard", l.tensorboard);
  l.tensorboard_dir = r.optional<std::string>("tensorboard_dir");
  if (l.tensorboard_dir && l.tensorboard_dir->empty())
    r.fail("tensorboard_dir", "must not be empty (leave it out for the run folder)");
  l.progress = r.choice("progress", {"auto", "always", "never"}, l.progress);
  r.finish();
  return l;
}

}  // namespace triax::config
