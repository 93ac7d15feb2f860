// What the logging rank (world rank 0) reports of a run: the step log line, metrics.jsonl and
// TensorBoard events for each logged step, the live progress line between log lines, and at the
// end the benchmark CSV row of general.benchmark_csv_path (as nanotron's benchmark mode appends).
// Every output is opened before the first step: a folder or file that cannot be written stops
// the run with a ConfigError naming the config key and the path, before any training work.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "report/metrics.hpp"
#include "triax/core/config.hpp"

namespace triax {

class TensorBoardWriter;

// The facts of a run that the benchmark CSV records beside its throughput.
struct RunFacts {
  std::string model_plugin;
  int64_t parameters = 0;
  std::string device;
  int64_t world_size = 1;
  int64_t tokens_per_step = 0;
};

class RunReporter {
 public:
  // `resumed_at`: the step a resumed run starts after (0 for a new run), see MetricsFile.
  RunReporter(const TrainConfig& config, bool logging_rank, int64_t resumed_at = 0);
  ~RunReporter();

  // Where the outputs go, for the start of the log.
  std::vector<std::string> describe() const;
  // After an unlogged step: the live line "step S/N | s/step | eta" (terminals only).
  void step_done(int64_t step, int64_t total_steps, double seconds_per_step);
  // A logged step: the log line, a JSON line, TensorBoard scalars.
  void logged(const StepMetrics& metrics);
  // A validation: its log line, JSON line and TensorBoard scalars.
  void validated(const ValidationMetrics& metrics);
  // The benchmark CSV row, when general.benchmark_csv_path is set.
  void finish(const RunFacts& facts);

 private:
  const TrainConfig& config_;
  bool logging_rank_;
  std::unique_ptr<MetricsFile> metrics_file_;
  void write_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::string tensorboard_note_;  // why there are no events, when there are none
  // Throughput over the logged intervals after the first one (which holds the warm-up).
  int64_t last_logged_step_ = 0;
  int64_t measured_steps_ = 0;
  double measured_seconds_ = 0.0;
  std::optional<StepMetrics> first_, last_;
  int64_t peak_memory_bytes_ = 0;
};

}  // namespace triax
