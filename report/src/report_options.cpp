#include "triax/report/report_options.hpp"

#include <filesystem>

namespace triax {
namespace {

log::ProgressMode progress_mode(const std::string& name) {
  if (name == "always") return log::ProgressMode::always;
  if (name == "never") return log::ProgressMode::never;
  return log::ProgressMode::automatic;
}

BenchmarkSetup benchmark_setup(const TrainConfig& config) {
  const ParallelismConfig& p = config.parallelism;
  const TokensConfig& t = config.tokens;
  BenchmarkSetup setup;
  setup.config = config.origin;
  setup.run = config.general.run;
  setup.dp = p.dp;
  setup.tp = p.tp;
  setup.pp = p.pp;
  setup.expert_parallel_size = p.expert_parallel_size;
  setup.pp_engine = p.pp_engine;
  setup.zero_stage = config.optimizer.zero_stage;
  setup.tp_mode = p.tp_mode;
  setup.sequence_length = t.sequence_length;
  setup.micro_batch_size = t.micro_batch_size;
  setup.batch_accumulation_per_replica = t.batch_accumulation_per_replica;
  setup.train_steps = t.train_steps;
  return setup;
}

}  // namespace

RunReporterOptions run_reporter_options(const TrainConfig& config, bool logging_rank, int64_t resumed_at) {
  const LoggingConfig& l = config.logging;
  RunReporterOptions options;
  options.logging_rank = logging_rank;
  options.metrics_path = (std::filesystem::path(config.run_dir()) / "metrics.jsonl").string();
  options.resumed_at = resumed_at;
  options.progress = progress_mode(l.progress);
  if (l.tensorboard)
    options.tensorboard = TensorBoardOptions{
        l.tensorboard_dir.value_or(config.run_dir()),
        config.origin + ": " + (l.tensorboard_dir ? "logging.tensorboard_dir" : "checkpoints.checkpoints_path")};
  options.benchmark_csv_path = config.general.benchmark_csv_path;
  options.benchmark = benchmark_setup(config);
  return options;
}

std::optional<ProfilerOptions> profiler_options(const TrainConfig& config) {
  if (!config.profiler) return std::nullopt;
  ProfilerOptions options = config.profiler->options;
  options.key = config.origin + ": profiler.profiler_export_path";
  return options;
}

}  // namespace triax
