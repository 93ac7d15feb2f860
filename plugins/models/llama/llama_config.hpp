// model.model_config of a Llama model, read strictly.
//
// The keys are those of nanotron's LlamaConfig (so a nanotron config loads unchanged), with
// nanotron's defaults. Keys that only select an implementation detail nanotron offers
// (_attn_implementation, pretraining_tp, use_cache) are accepted; values that would change the
// model in a way this plugin does not implement are refused with the key's path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "triax/config_reader.hpp"
#include "triax/decoder_config.hpp"

namespace triax::llama {

struct LlamaConfig : DecoderConfig {
  int64_t pretraining_tp = 1;

  int head_block() const { return static_cast<int>(num_hidden_layers + 1); }

  // Reads and validates every key of `reader` (a model.model_config mapping), then calls
  // reader.finish(): an unknown key, a wrong type or an impossible value is a ConfigError naming
  // the key's path. Defaults are recorded into reader.resolved().
  static LlamaConfig read(ConfigReader& reader);
  // The sizes are positive and the model is one that can be allocated; otherwise a ConfigError.
  void check_sizes(const ConfigReader& reader) const;
};

// Forward FLOPs per token of each pipeline block (PaLM convention: 2 per multiply-add, attention
// scores without causal discount; the norms are not counted).
std::vector<double> llama_block_costs(const LlamaConfig& config, int64_t sequence_length);

}  // namespace triax::llama
