#include "report/run_reporter.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "report/tensorboard/tensorboard_writer.hpp"  // declarations only: built with protobuf when found
#include "triax/report/log.hpp"
#include "report/progress.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;

// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string number_text(double value) {
  std::ostringstream out;
  out << std::setprecision(6) << value;
  return out.str();
}

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

const char* const kCsvHeader =
    "date,config,run,model,parameters,device,world_size,dp,tp,pp,expert_parallel_size,pp_engine,zero_stage,tp_mode,"
    "sequence_length,micro_batch_size,batch_accumulation_per_replica,global_batch_tokens,train_steps,tokens_per_s,"
    "tokens_per_s_per_device,model_tflops_per_device,mfu,peak_memory_bytes";

// Opens the benchmark CSV for appending now, so that an unwritable path stops the run first.
void check_benchmark_csv(const std::string& origin, const std::string& path) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  std::ofstream probe(path, std::ios::app);
  if (ec || !probe)
    throw ConfigError(origin + ": general.benchmark_csv_path: cannot append to '" + path + "'" +
                      (ec ? ": " + ec.message() : std::string(" (is its folder writable?)")));
}

}  // namespace

RunReporter::RunReporter(const TrainConfig& config, bool logging_rank, int64_t resumed_at)
    : config_(config), logging_rank_(logging_rank) {
  if (!logging_rank_) return;
  const LoggingConfig& l = config.logging;
  log::set_progress_mode(l.progress == "always"  ? log::ProgressMode::always
                         : l.progress == "never" ? log::ProgressMode::never
                                                 : log::ProgressMode::automatic);
  metrics_file_ = std::make_unique<MetricsFile>((fs::path(config.run_dir()) / "metrics.jsonl").string(), resumed_at);
  if (config.general.benchmark_csv_path) check_benchmark_csv(config.origin, *config.general.benchmark_csv_path);
  if (!l.tensorboard) {
    tensorboard_note_ = "off (logging.tensorboard)";
    return;
  }
#ifdef TRIAX_WITH_TENSORBOARD
  const std::string key =
      config.origin + ": " + (l.tensorboard_dir ? "logging.tensorboard_dir" : "checkpoints.checkpoints_path");
  tensorboard_ = std::make_unique<TensorBoardWriter>(l.tensorboard_dir.value_or(config.run_dir()), key);
#else
  tensorboard_note_ = "none: this build has no protobuf (install libprotobuf-dev and protobuf-compiler, reconfigure)";
#endif
}

RunReporter::~RunReporter() { log::end_progress(); }

std::vector<std::string> RunReporter::describe() const {
  if (!logging_rank_) return {"metrics: rank 0 only"};
  std::vector<std::string> lines{"metrics: " + metrics_file_->path()};
#ifdef TRIAX_WITH_TENSORBOARD
  if (tensorboard_) lines.push_back("TensorBoard events: " + tensorboard_->path());
#endif
  if (!tensorboard_note_.empty()) lines.push_back("TensorBoard events: " + tensorboard_note_);
  if (config_.general.benchmark_csv_path)
    lines.push_back("benchmark: one row appended to " + *config_.general.benchmark_csv_path + " at the end");
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

void RunReporter::finish(const RunFacts& facts) {
  if (!logging_rank_ || !config_.general.benchmark_csv_path || !last_) return;
  const std::string& path = *config_.general.benchmark_csv_path;
  // Throughput after the first logged interval; a run logged once has only that one.
  const double seconds_per_step =
      measured_steps_ ? measured_seconds_ / static_cast<double>(measured_steps_) : first_->step_seconds;
  const double tokens_per_s = static_cast<double>(facts.tokens_per_step) / seconds_per_step;
  const double per_device = tokens_per_s / static_cast<double>(facts.world_size);
  const double tflops = last_->tokens_per_second_per_device > 0
                            ? last_->model_tflops_per_device / last_->tokens_per_second_per_device * per_device
                            : 0.0;
  // MFU scales with the throughput: the last logged MFU at this run's mean throughput.
  const bool has_mfu = last_->mfu.has_value() && last_->model_tflops_per_device > 0;
  const double mfu = has_mfu ? last_->mfu.value() / last_->model_tflops_per_device * tflops : 0.0;
  const ParallelismConfig& p = config_.parallelism;
  const TokensConfig& t = config_.tokens;
  std::ostringstream row;
  row << utc_timestamp() << "," << csv_field(config_.origin) << "," << csv_field(config_.general.run) << ","
      << csv_field(facts.model_plugin) << "," << facts.parameters << "," << csv_field(facts.device) << ","
      << facts.world_size << "," << p.dp << "," << p.tp << "," << p.pp << "," << p.expert_parallel_size << ","
      << csv_field(p.pp_engine) << "," << config_.optimizer.zero_stage << "," << p.tp_mode << "," << t.sequence_length
      << "," << t.micro_batch_size << "," << t.batch_accumulation_per_replica << "," << facts.tokens_per_step << ","
      << t.train_steps << "," << number_text(tokens_per_s) << "," << number_text(per_device) << ","
      << number_text(tflops) << "," << (has_mfu ? number_text(mfu) : "") << "," << peak_memory_bytes_ << "\n";
  std::error_code ec;
  const bool fresh = !fs::exists(path, ec) || fs::file_size(path, ec) == 0;
  std::ofstream out(path, std::ios::app);
  if (fresh) out << kCsvHeader << "\n";
  out << row.str();
  out.flush();
  if (!out)
    log::warning("general.benchmark_csv_path: could not append to " + path + "; the row was: " + row.str());
  else
    log::info("benchmark: appended a row to " + path);
}

}  // namespace triax
