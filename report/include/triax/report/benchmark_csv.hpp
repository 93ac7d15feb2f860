// The benchmark CSV (general.benchmark_csv_path): one row appended per run, as nanotron's
// benchmark mode does, with the run's setup beside its throughput. The header line is written
// when the file is new or empty.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace triax {

// What the row records of the run's configuration.
struct BenchmarkSetup {
  std::string config;  // the config file; also named in errors
  std::string run;
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t expert_parallel_size = 1;
  std::string pp_engine;
  int64_t zero_stage = 0;
  std::string tp_mode;
  int64_t sequence_length = 0;
  int64_t micro_batch_size = 0;
  int64_t batch_accumulation_per_replica = 0;
  int64_t train_steps = 0;
};

// The facts of a run that the benchmark CSV records beside its throughput.
struct RunFacts {
  std::string model_plugin;
  int64_t parameters = 0;
  std::string device;
  int64_t world_size = 1;
  int64_t tokens_per_step = 0;
};

// The run's measured speed, as the row records it.
struct BenchmarkThroughput {
  double tokens_per_s = 0.0;
  double tokens_per_s_per_device = 0.0;
  double model_tflops_per_device = 0.0;
  std::optional<double> mfu;  // empty: the device's peak is unknown
  int64_t peak_memory_bytes = 0;
};

class BenchmarkCsv {
 public:
  // Opens `path` for appending now, so that an unwritable path stops the run before any step
  // (ConfigError naming setup.config and general.benchmark_csv_path).
  BenchmarkCsv(std::string path, BenchmarkSetup setup);

  // Appends the row and logs where; a failed write is a warning that holds the row.
  void append(const RunFacts& facts, const BenchmarkThroughput& throughput) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  BenchmarkSetup setup_;
};

}  // namespace triax
