// Per-step training metrics: throughput, model FLOP/s and MFU, memory, timing; formatted as the
// rank-0 log line and as one JSON object per line in the run folder's metrics.jsonl.
//
// MFU = flops_per_token × tokens/s/device ÷ peak, where flops_per_token is the model plugin's
// training FLOPs per token (the log names the plugin's formula) and the peak is
// logging.peak_tflops or the device's dense bf16 peak when known.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace triax {

// What a background save (checkpoints.async_save) cost the training, once its files are committed.
struct SaveCost {
  int64_t step = 0;             // the step saved
  double stall_seconds = 0.0;   // the training's stall in all: queueing the copies, device_wait, commit
  double device_wait_seconds = 0.0;  // the next optimizer step's wait on the device for the copies
  double staging_seconds = 0.0;      // the copies that step waits for, on the device
  double host_copy_seconds = 0.0;    // the staging buffer to host memory, beside the steps
  double write_seconds = 0.0;        // this rank's file, written in the background
};

struct StepMetrics {
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0.0;
  std::vector<std::pair<std::string, double>> aux_losses;  // by name, in the model's order
  double learning_rate = 0.0;
  double grad_norm = 0.0;
  double tokens_per_second = 0.0;  // whole job
  double tokens_per_second_per_device = 0.0;
  double model_tflops_per_device = 0.0;
  std::optional<double> mfu;  // fraction of the peak, when the peak is known
  int64_t consumed_tokens = 0;
  int64_t peak_memory_bytes = 0;           // since the start of the run
  int64_t interval_peak_memory_bytes = 0;  // since the previous logged step (on CPU: since the start)
  double step_seconds = 0.0;  // mean over the logging interval
  double elapsed_seconds = 0.0;
  double eta_seconds = 0.0;
  int64_t skipped_steps = 0;  // non-finite steps skipped so far (general.nonfinite_policy: skip)
  // Samples each dataset of the current data stage has given so far (the mixture's counts), by folder.
  std::vector<std::pair<std::string, int64_t>> dataset_samples;
  // A background save committed since the last logged step: in the JSON line as "checkpoint".
  std::optional<SaveCost> checkpoint;
};

// One validation (tokens.val_check_interval): the mean LM cross-entropy over the counted tokens
// of every validation micro-batch of every replica, after step `step`.
struct ValidationMetrics {
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0.0;
  double perplexity = 0.0;  // exp(loss)
  int64_t tokens = 0;       // counted tokens, all replicas
  int64_t micro_batches = 0;  // per replica (tokens.limit_val_batches)
  double seconds = 0.0;
};

// Peak FLOP/s per device used for MFU, and where the number comes from.
struct DevicePeak {
  std::optional<double> tflops;
  std::string source;
};

// `device_name`: "cpu" or the CUDA device's name; `configured`: logging.peak_tflops.
DevicePeak device_peak(const std::string& device_name, std::optional<double> configured);

std::string format_step_line(const StepMetrics& metrics);
std::string to_json_line(const StepMetrics& metrics);
// Every number of the JSON line but the step counters, tagged by its JSON key path ("loss",
// "aux_losses/NAME", "data_consumed_samples/FOLDER"): the TensorBoard scalars.
std::vector<std::pair<std::string, double>> scalar_series(const StepMetrics& metrics);
std::string format_duration(double seconds);  // H:MM:SS
// The validation's log line, its metrics.jsonl line ({"step": S, "val_loss": ...}: told apart
// from a step's line by val_loss) and its TensorBoard scalars (every number of that line but the
// step counters, by key: val_loss, val_ppl, ...).
std::string format_validation_line(const ValidationMetrics& metrics);
std::string to_json_line(const ValidationMetrics& metrics);
std::vector<std::pair<std::string, double>> scalar_series(const ValidationMetrics& metrics);

// Peak resident memory of this process (CPU runs), in bytes.
int64_t peak_resident_bytes();

// Appends one JSON object per logged step to a file, flushed at every line.
class MetricsFile {
 public:
  // A run resumed at step `resumed_at` (> 0) into the folder that holds the file keeps the lines
  // of steps up to that one and drops the rest (steps that are trained again); otherwise the
  // file starts empty.
  explicit MetricsFile(const std::string& path, int64_t resumed_at = 0);
  void write(const StepMetrics& metrics);
  void write(const ValidationMetrics& metrics);
  const std::string& path() const { return path_; }

 private:
  void write_line(const std::string& line);

  std::string path_;
  std::ofstream out_;
};

}  // namespace triax
