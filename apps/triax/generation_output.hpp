// What `triax generate` shows: each sequence on stdout (text when there is a tokenizer, token
// ids otherwise), a JSON-lines file for programs (--output), and the throughput line.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "triax/generate/generator.hpp"

namespace triax::cli {

struct GenerationReport {
  std::vector<std::vector<int64_t>> prompts;
  generation::GenerationResult result;
  // With a tokenizer: each prompt's text and each sequence's new text; empty without one.
  std::vector<std::string> prompt_texts, new_texts;
};

void print_generations(std::ostream& out, const GenerationReport& report);
// One JSON object per sequence: index, prompt_ids, new_ids, stop ("eos" or "length"), and with
// a tokenizer prompt and text. Throws naming the file when it cannot be written.
void write_generations_jsonl(const std::string& path, const GenerationReport& report);
// "generated N tokens for B sequences in T s: X tokens/s (prefill ..., decode ...)".
std::string throughput_line(const generation::GenerationStats& stats, size_t sequences);

}  // namespace triax::cli
