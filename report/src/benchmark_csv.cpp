#include "triax/report/benchmark_csv.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <utility>

#include "triax/error.hpp"
#include "triax/report/log.hpp"

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

std::string csv_row(const BenchmarkSetup& s, const RunFacts& facts, const BenchmarkThroughput& t) {
  std::ostringstream row;
  row << utc_timestamp() << "," << csv_field(s.config) << "," << csv_field(s.run) << ","
      << csv_field(facts.model_plugin) << "," << facts.parameters << "," << csv_field(facts.device) << ","
      << facts.world_size << "," << s.dp << "," << s.tp << "," << s.pp << "," << s.expert_parallel_size << ","
      << csv_field(s.pp_engine) << "," << s.zero_stage << "," << s.tp_mode << "," << s.sequence_length << ","
      << s.micro_batch_size << "," << s.batch_accumulation_per_replica << "," << facts.tokens_per_step << ","
      << s.train_steps << "," << number_text(t.tokens_per_s) << "," << number_text(t.tokens_per_s_per_device) << ","
      << number_text(t.model_tflops_per_device) << "," << (t.mfu ? number_text(*t.mfu) : "") << ","
      << t.peak_memory_bytes << "\n";
  return row.str();
}

}  // namespace

BenchmarkCsv::BenchmarkCsv(std::string path, BenchmarkSetup setup) : path_(std::move(path)), setup_(std::move(setup)) {
  std::error_code ec;
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  std::ofstream probe(path_, std::ios::app);
  if (ec || !probe)
    throw ConfigError(setup_.config + ": general.benchmark_csv_path: cannot append to '" + path_ + "'" +
                      (ec ? ": " + ec.message() : std::string(" (is its folder writable?)")));
}

void BenchmarkCsv::append(const RunFacts& facts, const BenchmarkThroughput& throughput) const {
  const std::string row = csv_row(setup_, facts, throughput);
  std::error_code ec;
  const bool fresh = !fs::exists(path_, ec) || fs::file_size(path_, ec) == 0;
  std::ofstream out(path_, std::ios::app);
  if (fresh) out << kCsvHeader << "\n";
  out << row;
  out.flush();
  if (!out)
    log::warning("general.benchmark_csv_path: could not append to " + path_ + "; the row was: " + row);
  else
    log::info("benchmark: appended a row to " + path_);
}

}  // namespace triax
