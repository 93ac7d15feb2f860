#include "generation_output.hpp"

#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "triax/error.hpp"

namespace triax::cli {
namespace {

std::string ids_text(const std::vector<int64_t>& ids) {
  std::ostringstream text;
  for (size_t i = 0; i < ids.size(); ++i) text << (i ? " " : "") << ids[i];
  return text.str();
}

double per_second(int64_t count, double seconds) { return seconds > 0 ? static_cast<double>(count) / seconds : 0.0; }

}  // namespace

void print_generations(std::ostream& out, const GenerationReport& report) {
  const bool text = !report.new_texts.empty();
  for (size_t i = 0; i < report.result.sequences.size(); ++i) {
    const generation::GeneratedSequence& s = report.result.sequences[i];
    out << "[" << i << "] ";
    if (text)
      out << report.prompt_texts[i] << report.new_texts[i];
    else
      out << ids_text(report.prompts[i]) << " -> " << ids_text(s.tokens);
    out << (s.stopped_at_eos ? "  (eos)" : "") << "\n";
  }
  out.flush();
}

void write_generations_jsonl(const std::string& path, const GenerationReport& report) {
  std::ofstream file(path);
  if (!file) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "--output " + path + ": cannot write this file");
  for (size_t i = 0; i < report.result.sequences.size(); ++i) {
    const generation::GeneratedSequence& s = report.result.sequences[i];
    nlohmann::json line = {{"index", i},
                           {"prompt_ids", report.prompts[i]},
                           {"new_ids", s.tokens},
                           {"stop", s.stopped_at_eos ? "eos" : "length"}};
    if (!report.new_texts.empty()) {
      line["prompt"] = report.prompt_texts[i];
      line["text"] = report.new_texts[i];
    }
    file << line.dump() << "\n";
  }
  if (!file) throw Error("--output " + path + ": writing failed");
}

std::string throughput_line(const generation::GenerationStats& stats, size_t sequences) {
  const double seconds = stats.prefill_seconds + stats.decode_seconds;
  // The decode phase makes every token but each sequence's first.
  const int64_t decoded = stats.new_tokens - static_cast<int64_t>(sequences);
  std::ostringstream line;
  line << std::fixed << std::setprecision(1) << "generated " << stats.new_tokens << " tokens for " << sequences
       << " sequence(s) in " << std::setprecision(3) << seconds << " s: " << std::setprecision(1)
       << per_second(stats.new_tokens, seconds) << " tokens/s (prefill: " << stats.prompt_tokens << " prompt tokens in "
       << std::setprecision(3) << stats.prefill_seconds << " s; decode: " << std::setprecision(1)
       << per_second(decoded, stats.decode_seconds) << " tokens/s at batch " << sequences << ")";
  return line.str();
}

}  // namespace triax::cli
