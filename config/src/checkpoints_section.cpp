// checkpoints: where the run folder is, how often to save, what to resume from.
#include "config_sections.hpp"

namespace triax::config {

CheckpointsConfig read_checkpoints(ConfigReader& root, const std::string& run) {
  // A config that has the section names its folder; without it the run gets runs/<run>.
  const bool present = root.contains("checkpoints");
  ConfigReader r = section_or_empty(root, "checkpoints");
  CheckpointsConfig c;
  if (present) {
    c.checkpoints_path = r.required<std::string>("checkpoints_path");
    if (c.checkpoints_path.empty()) r.fail("checkpoints_path", "must not be empty");
  } else {
    c.checkpoints_path = r.get<std::string>("checkpoints_path", "runs/" + run);
  }
  c.checkpoint_interval = int_or(r, "checkpoint_interval", c.checkpoint_interval, 0);
  c.save_initial_state = r.get<bool>("save_initial_state", c.save_initial_state);
  c.save_final_state = r.get<bool>("save_final_state", c.save_final_state);
  c.resume_checkpoint_path = r.optional<std::string>("resume_checkpoint_path");
  c.load_lr_scheduler = r.get<bool>("load_lr_scheduler", c.load_lr_scheduler);
  c.load_optimizer = r.get<bool>("load_optimizer", c.load_optimizer);
  c.checkpoints_path_is_shared_file_system =
      r.get<bool>("checkpoints_path_is_shared_file_system", c.checkpoints_path_is_shared_file_system);
  c.keep_last = int_or(r, "keep_last", c.keep_last, 0);
  c.async_save = r.get<bool>("async_save", c.async_save);
  r.finish();
  return c;
}

}  // namespace triax::config
