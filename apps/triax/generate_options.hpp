// The options of `triax generate`, parsed from its arguments; command_generate.cpp runs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parsed_options.hpp"
#include "triax/generate/generator.hpp"

namespace triax::cli {

struct GenerateOptions {
  std::string model, config, tokenizer, device, dtype, output;
  std::vector<std::string> sets, prompts, prompt_ids, plugin_paths;
  std::vector<int64_t> eos;
  bool ignore_eos = false, no_cache = false;
  std::string cuda_graphs = "auto";
  int64_t repeat = 1;
  int64_t warmup = 0;
  int tp = 0;
  generation::GenerationOptions decoding;  // max new tokens, sampling, seed, profile
};

// The options, or the status to leave with after --help or a usage error (said on stderr).
Parsed<GenerateOptions> parse_generate_options(const std::vector<std::string>& args);

}  // namespace triax::cli
