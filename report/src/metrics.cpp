#include "triax/report/metrics.hpp"

#include <sys/resource.h>

#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "triax/error.hpp"

namespace triax {
namespace {

std::string human_count(double value) {
  std::ostringstream out;
  out << std::fixed;
  if (value >= 1e9)
    out << std::setprecision(2) << value / 1e9 << "G";
  else if (value >= 1e6)
    out << std::setprecision(2) << value / 1e6 << "M";
  else if (value >= 1e3)
    out << std::setprecision(1) << value / 1e3 << "K";
  else
    out << std::setprecision(0) << value;
  return out.str();
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  std::ostringstream out;
  out << std::setprecision(9) << value;
  return out.str();
}

// A JSON string, escaped (aux-loss and folder names are free text).
std::string json_string(const std::string& text) { return nlohmann::json(text).dump(); }

}  // namespace

DevicePeak device_peak(const std::string& device_name, std::optional<double> configured) {
  if (configured) return {configured, "logging.peak_tflops"};
  // Dense bf16 tensor-core peaks (NVIDIA data sheets, SXM parts).
  if (device_name.find("H100") != std::string::npos || device_name.find("H200") != std::string::npos)
    return {989.0, device_name + " dense bf16 peak"};
  if (device_name.find("A100") != std::string::npos) return {312.0, device_name + " dense bf16 peak"};
  return {std::nullopt, "unknown for " + device_name + "; set logging.peak_tflops to report MFU"};
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  int64_t total = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream out;
  out << total / 3600 << ":" << std::setw(2) << std::setfill('0') << (total / 60) % 60 << ":" << std::setw(2)
      << std::setfill('0') << total % 60;
  return out.str();
}

std::string format_step_line(const StepMetrics& m) {
  std::ostringstream out;
  int width = static_cast<int>(std::to_string(m.total_steps).size());
  out << "step " << std::setw(width) << m.step << "/" << m.total_steps << std::fixed << std::setprecision(4)
      << " | loss " << m.loss;
  for (const auto& [name, value] : m.aux_losses) out << " | " << name << " " << value;
  out << std::scientific << std::setprecision(3) << " | lr " << m.learning_rate << std::fixed << std::setprecision(3)
      << " | grad_norm " << m.grad_norm << " | tokens/s " << human_count(m.tokens_per_second) << " | tokens/s/device "
      << human_count(m.tokens_per_second_per_device) << " | TFLOP/s/device " << std::setprecision(2)
      << m.model_tflops_per_device << " | MFU ";
  if (m.mfu)
    out << std::setprecision(1) << *m.mfu * 100 << "%";
  else
    out << "n/a";
  out << " | peak_mem " << std::setprecision(0) << static_cast<double>(m.peak_memory_bytes) / (1 << 20) << " MiB"
      << " | elapsed " << format_duration(m.elapsed_seconds) << " | eta " << format_duration(m.eta_seconds);
  if (m.skipped_steps > 0) out << " | skipped " << m.skipped_steps;
  return out.str();
}

std::string to_json_line(const StepMetrics& m) {
  std::ostringstream out;
  out << "{\"step\": " << m.step << ", \"total_steps\": " << m.total_steps << ", \"loss\": " << json_number(m.loss)
      << ", \"aux_losses\": {";
  for (size_t i = 0; i < m.aux_losses.size(); ++i)
    out << (i ? ", " : "") << json_string(m.aux_losses[i].first) << ": " << json_number(m.aux_losses[i].second);
  out << "}, \"lr\": " << json_number(m.learning_rate) << ", \"grad_norm\": " << json_number(m.grad_norm)
      << ", \"tokens_per_s\": " << json_number(m.tokens_per_second)
      << ", \"tokens_per_s_per_device\": " << json_number(m.tokens_per_second_per_device)
      << ", \"model_tflops_per_device\": " << json_number(m.model_tflops_per_device)
      << ", \"mfu\": " << (m.mfu ? json_number(*m.mfu) : "null") << ", \"consumed_tokens\": " << m.consumed_tokens
      << ", \"peak_memory_bytes\": " << m.peak_memory_bytes
      << ", \"interval_peak_memory_bytes\": " << m.interval_peak_memory_bytes
      << ", \"step_s\": " << json_number(m.step_seconds) << ", \"elapsed_s\": " << json_number(m.elapsed_seconds)
      << ", \"eta_s\": " << json_number(m.eta_seconds) << ", \"skipped_steps\": " << m.skipped_steps
      << ", \"data_consumed_samples\": {";
  for (size_t i = 0; i < m.dataset_samples.size(); ++i)
    out << (i ? ", " : "") << json_string(m.dataset_samples[i].first) << ": " << m.dataset_samples[i].second;
  out << "}";
  if (m.checkpoint)
    out << ", \"checkpoint\": {\"step\": " << m.checkpoint->step << ", \"stall_s\": " << json_number(m.checkpoint->stall_seconds)
        << ", \"device_wait_s\": " << json_number(m.checkpoint->device_wait_seconds)
        << ", \"staging_s\": " << json_number(m.checkpoint->staging_seconds)
        << ", \"host_copy_s\": " << json_number(m.checkpoint->host_copy_seconds)
        << ", \"write_s\": " << json_number(m.checkpoint->write_seconds) << "}";
  out << "}";
  return out.str();
}

std::vector<std::pair<std::string, double>> scalar_series(const StepMetrics& m) {
  std::vector<std::pair<std::string, double>> series{{"loss", m.loss}};
  for (const auto& [name, value] : m.aux_losses) series.emplace_back("aux_losses/" + name, value);
  series.insert(series.end(), {{"lr", m.learning_rate},
                               {"grad_norm", m.grad_norm},
                               {"tokens_per_s", m.tokens_per_second},
                               {"tokens_per_s_per_device", m.tokens_per_second_per_device},
                               {"model_tflops_per_device", m.model_tflops_per_device}});
  if (m.mfu) series.emplace_back("mfu", *m.mfu);
  series.insert(series.end(), {{"consumed_tokens", static_cast<double>(m.consumed_tokens)},
                               {"peak_memory_bytes", static_cast<double>(m.peak_memory_bytes)},
                               {"interval_peak_memory_bytes", static_cast<double>(m.interval_peak_memory_bytes)},
                               {"step_s", m.step_seconds},
                               {"elapsed_s", m.elapsed_seconds},
                               {"eta_s", m.eta_seconds},
                               {"skipped_steps", static_cast<double>(m.skipped_steps)}});
  for (const auto& [folder, samples] : m.dataset_samples)
    series.emplace_back("data_consumed_samples/" + folder, static_cast<double>(samples));
  if (m.checkpoint)
    series.insert(series.end(), {{"checkpoint/stall_s", m.checkpoint->stall_seconds},
                                 {"checkpoint/device_wait_s", m.checkpoint->device_wait_seconds},
                                 {"checkpoint/staging_s", m.checkpoint->staging_seconds},
                                 {"checkpoint/host_copy_s", m.checkpoint->host_copy_seconds},
                                 {"checkpoint/write_s", m.checkpoint->write_seconds}});
  return series;
}

std::string format_validation_line(const ValidationMetrics& m) {
  std::ostringstream out;
  const int width = static_cast<int>(std::to_string(m.total_steps).size());
  out << "validation after step " << std::setw(width) << m.step << "/" << m.total_steps << std::fixed
      << std::setprecision(4) << " | val_loss " << m.loss << " | val_ppl " << std::setprecision(3) << m.perplexity
      << " | " << human_count(static_cast<double>(m.tokens)) << " tokens in " << m.micro_batches
      << " micro-batches per replica | " << std::setprecision(2) << m.seconds << " s";
  return out.str();
}

std::string to_json_line(const ValidationMetrics& m) {
  std::ostringstream out;
  out << "{\"step\": " << m.step << ", \"total_steps\": " << m.total_steps << ", \"val_loss\": " << json_number(m.loss)
      << ", \"val_ppl\": " << json_number(m.perplexity) << ", \"val_tokens\": " << m.tokens
      << ", \"val_micro_batches\": " << m.micro_batches << ", \"val_s\": " << json_number(m.seconds) << "}";
  return out.str();
}

std::vector<std::pair<std::string, double>> scalar_series(const ValidationMetrics& m) {
  return {{"val_loss", m.loss},
          {"val_ppl", m.perplexity},
          {"val_tokens", static_cast<double>(m.tokens)},
          {"val_micro_batches", static_cast<double>(m.micro_batches)},
          {"val_s", m.seconds}};
}

int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

MetricsFile::MetricsFile(const std::string& path, int64_t resumed_at) : path_(path) {
  std::string kept;
  std::ifstream in(path);
  for (std::string line; resumed_at > 0 && std::getline(in, line);) {
    long long step = 0;
    if (std::sscanf(line.c_str(), "{\"step\": %lld,", &step) == 1 && step <= resumed_at) kept += line + "\n";
  }
  in.close();
  out_.open(path, std::ios::out | std::ios::trunc);
  out_ << kept;
  out_.flush();
  if (!out_) throw Error("cannot write the metrics file " + path);
}

void MetricsFile::write(const StepMetrics& metrics) { write_line(to_json_line(metrics)); }

void MetricsFile::write(const ValidationMetrics& metrics) { write_line(to_json_line(metrics)); }

void MetricsFile::write_line(const std::string& line) {
  out_ << line << "\n";
  out_.flush();
  if (!out_) throw Error("writing the metrics file " + path_ + " failed");
}

}  // namespace triax
