#include "triax/report/run_reporter.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "tensorboard/tensorboard_writer.hpp"  // declarations only: built with protobuf when found
#include "triax/error.hpp"
#include "triax/report/progress.hpp"

namespace triax {

RunReporter::RunReporter(RunReporterOptions options) : logging_rank_(options.logging_rank) {
  if (!logging_rank_) return;
  log::set_progress_mode(options.progress);
  metrics_file_ = std::make_unique<MetricsFile>(options.metrics_path, options.resumed_at);
  if (options.benchmark_csv_path) benchmark_csv_.emplace(*options.benchmark_csv_path, std::move(options.benchmark));
  open_tensorboard(options.tensorboard);
}

RunReporter::~RunReporter() { log::end_progress(); }

void RunReporter::open_tensorboard([[maybe_unused]] const std::optional<TensorBoardOptions>& options) {
  if (!options) {
    tensorboard_note_ = "off (logging.tensorboard)";
    return;
  }
#ifdef TRIAX_WITH_TENSORBOARD
  tensorboard_ = std::make_unique<TensorBoardWriter>(options->folder, options->key);
#else
  tensorboard_note_ = "none: this build has no protobuf (install libprotobuf-dev and protobuf-compiler, reconfigure)";
#endif
}

std::vector<std::string> RunReporter::describe() const {
  if (!logging_rank_) return {"metrics: rank 0 only"};
  std::vector<std::string> lines{"metrics: " + metrics_file_->path()};
#ifdef TRIAX_WITH_TENSORBOARD
  if (tensorboard_) lines.push_back("TensorBoard events: " + tensorboard_->path());
#endif
  if (!tensorboard_note_.empty()) lines.push_back("TensorBoard events: " + tensorboard_note_);
  if (benchmark_csv_) lines.push_back("benchmark: one row appended to " + benchmark_csv_->path() + " at the end");
  return lines;
}

void RunReporter::step_done(int64_t step, int64_t total_steps, double seconds_per_step) {
  if (!logging_rank_ || !log::progress_enabled()) return;
  std::ostringstream line;
  const int width = 24;
  const auto filled = static_cast<int>(width * step / std::max<int64_t>(1, total_steps));
  line << "step " << step << "/" << total_steps << " [" << std::string(filled, '#') << std::string(width - filled, '.')
       << "] " << std::fixed << std::setprecision(2) << seconds_per_step << " s/step | eta "
       << clock_text(seconds_per_step * static_cast<double>(total_steps - step));
  log::progress(line.str());
}

void RunReporter::write_scalars([[maybe_unused]] int64_t step,
                                [[maybe_unused]] const std::vector<std::pair<std::string, double>>& scalars) {
#ifdef TRIAX_WITH_TENSORBOARD
  if (!tensorboard_) return;
  try {
    tensorboard_->write_scalars(step, scalars);
  } catch (const Error& e) {
    // The run goes on (its metrics.jsonl has every number); only the events stop.
    log::warning(std::string(e.what()) + ": no more TensorBoard events in this run");
    tensorboard_.reset();
    tensorboard_note_ = "stopped after a failed write";
  }
#endif
}

void RunReporter::validated(const ValidationMetrics& m) {
  if (!logging_rank_) return;
  log::info(format_validation_line(m));
  metrics_file_->write(m);
  write_scalars(m.step, scalar_series(m));
}

void RunReporter::logged(const StepMetrics& m) {
  if (!logging_rank_) return;
  log::info(format_step_line(m));
  metrics_file_->write(m);
  write_scalars(m.step, scalar_series(m));
  const int64_t interval_steps = m.step - last_logged_step_;
  if (first_) {
    measured_steps_ += interval_steps;
    measured_seconds_ += m.step_seconds * static_cast<double>(interval_steps);
  } else {
    first_ = m;
  }
  last_logged_step_ = m.step;
  last_ = m;
  peak_memory_bytes_ = std::max(peak_memory_bytes_, m.peak_memory_bytes);
}

BenchmarkThroughput RunReporter::throughput(const RunFacts& facts) const {
  // Throughput after the first logged interval; a run logged once has only that one.
  const double seconds_per_step =
      measured_steps_ ? measured_seconds_ / static_cast<double>(measured_steps_) : first_->step_seconds;
  BenchmarkThroughput t;
  t.tokens_per_s = static_cast<double>(facts.tokens_per_step) / seconds_per_step;
  t.tokens_per_s_per_device = t.tokens_per_s / static_cast<double>(facts.world_size);
  t.model_tflops_per_device =
      last_->tokens_per_second_per_device > 0
          ? last_->model_tflops_per_device / last_->tokens_per_second_per_device * t.tokens_per_s_per_device
          : 0.0;
  // MFU scales with the throughput: the last logged MFU at this run's mean throughput.
  if (last_->mfu.has_value() && last_->model_tflops_per_device > 0)
    t.mfu = last_->mfu.value() / last_->model_tflops_per_device * t.model_tflops_per_device;
  t.peak_memory_bytes = peak_memory_bytes_;
  return t;
}

void RunReporter::finish(const RunFacts& facts) {
  if (!logging_rank_ || !benchmark_csv_ || !last_) return;
  benchmark_csv_->append(facts, throughput(facts));
}

}  // namespace triax
