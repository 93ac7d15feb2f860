// What the logging rank (world rank 0) reports of a run: the step log line, metrics.jsonl and
// TensorBoard events for each logged step, the live progress line between log lines, and at the
// end the benchmark CSV row (as nanotron's benchmark mode appends).
// Every output is opened before the first step: a folder or file that cannot be written stops
// the run with a ConfigError naming the config key and the path, before any training work.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "triax/report/benchmark_csv.hpp"
#include "triax/report/log.hpp"
#include "triax/report/metrics.hpp"

namespace triax {

class TensorBoardWriter;

// Where the event files go, when the run writes them.
struct TensorBoardOptions {
  std::string folder;
  std::string key;  // the config file and key that chose the folder, named in errors
};

struct RunReporterOptions {
  bool logging_rank = true;  // the other ranks report nothing
  std::string metrics_path;  // metrics.jsonl
  int64_t resumed_at = 0;    // the step a resumed run starts after (0 for a new run), see MetricsFile
  log::ProgressMode progress = log::ProgressMode::automatic;
  std::optional<TensorBoardOptions> tensorboard;  // empty: off (logging.tensorboard)
  std::optional<std::string> benchmark_csv_path;
  BenchmarkSetup benchmark;  // what the CSV row records, when there is one
};

class RunReporter {
 public:
  explicit RunReporter(RunReporterOptions options);
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
  void open_tensorboard(const std::optional<TensorBoardOptions>& options);
  void write_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  BenchmarkThroughput throughput(const RunFacts& facts) const;

  bool logging_rank_;
  std::unique_ptr<MetricsFile> metrics_file_;
  std::optional<BenchmarkCsv> benchmark_csv_;
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
