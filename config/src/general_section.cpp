// general: project, run name (with %date and %jobid expanded), seed, device, what non-finite
// values and preemption signals do, and CUDA graphs.
#include <cstdlib>
#include <ctime>

#include "config_sections.hpp"

namespace triax::config {
namespace {

// %date -> YYYYmmdd_HHMMSS (local time; TRIAX_RUN_DATE, when set, is used instead so that every
// rank of a job names the same run), %jobid -> SLURM_JOB_ID or "local". As nanotron does.
std::string expand_run_name(std::string run) {
  auto replace_all = [&run](const std::string& what, const std::string& with) {
    for (size_t at = run.find(what); at != std::string::npos; at = run.find(what, at + with.size()))
      run.replace(at, what.size(), with);
  };
  if (run.find("%date") != std::string::npos) {
    std::string date;
    if (const char* fixed = std::getenv("TRIAX_RUN_DATE"); fixed && *fixed) {
      date = fixed;
    } else {
      std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char text[32];
      std::strftime(text, sizeof(text), "%Y%m%d_%H%M%S", &local);
      date = text;
    }
    replace_all("%date", date);
  }
  if (run.find("%jobid") != std::string::npos) {
    const char* job = std::getenv("SLURM_JOB_ID");
    replace_all("%jobid", job && *job ? job : "local");
  }
  return run;
}

}  // namespace

GeneralConfig read_general(ConfigReader& root) {
  ConfigReader r = section_or_empty(root, "general");
  GeneralConfig g;
  g.project = nonempty_string_or(r, "project", g.project);
  g.run = expand_run_name(nonempty_string_or(r, "run", g.run));
  r.resolved()["run"] = g.run;
  g.seed = int_or(r, "seed", g.seed, 0, INT64_MAX);
  g.step = optional_int(r, "step", 0);
  g.consumed_train_samples = optional_int(r, "consumed_train_samples", 0);
  g.benchmark_csv_path = r.optional<std::string>("benchmark_csv_path");
  g.ignore_sanity_checks = r.get<bool>("ignore_sanity_checks", g.ignore_sanity_checks);
  g.device = r.choice("device", {"auto", "cpu", "cuda"}, g.device);
  g.nonfinite_policy = r.choice("nonfinite_policy", {"stop", "skip"}, g.nonfinite_policy);
  g.nonfinite_max_consecutive_skips = int_or(r, "nonfinite_max_consecutive_skips", g.nonfinite_max_consecutive_skips, 1);
  g.preemption_signals = r.get<std::vector<std::string>>("preemption_signals", g.preemption_signals);
  for (const std::string& name : g.preemption_signals)
    if (name != "SIGTERM" && name != "SIGUSR1" && name != "SIGUSR2" && name != "SIGINT" && name != "SIGHUP")
      r.fail("preemption_signals", "'" + name + "' is not one of SIGTERM, SIGUSR1, SIGUSR2, SIGINT, SIGHUP");
  g.cuda_graphs = r.get<bool>("cuda_graphs", g.cuda_graphs);
  if (g.cuda_graphs && g.device == "cpu")
    r.fail("cuda_graphs", "CUDA graphs need a CUDA device, and general.device is cpu");
  r.finish();
  return g;
}

}  // namespace triax::config
