// model.model_config of a Llama model, read strictly.
//
// The keys are those of nanotron's LlamaConfig (so a nanotron config loads unchanged), with
// nanotron's defaults. Keys that only select an implementation detail nanotron offers
// (_attn_implementation, pretraining_tp, use_cache) are accepted; values that would change the
// model in a way this plugin does not implement are refused with the key's path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "triax/config_reader.hpp"
#include "triax/layers/rotary_embedding.hpp"

namespace triax::llama {

struct LlamaConfig {
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;
  std::optional<int64_t> pad_token_id;
  std::string hidden_act = "silu";
  int64_t hidden_size = 4096;
  double initializer_range = 0.02;
  int64_t intermediate_size = 11008;
  int64_t max_position_embeddings = 2048;
  int64_t num_attention_heads = 32;
  int64_t num_hidden_layers = 32;
  int64_t num_key_value_heads = 32;  // null in the YAML means num_attention_heads
  int64_t pretraining_tp = 1;
  double rms_norm_eps = 1e-6;
  std::optional<RopeScaling> rope_scaling;
  double rope_theta = 10000.0;
  bool rope_interleaved = false;
  bool tie_word_embeddings = false;
  bool use_cache = true;
  int64_t vocab_size = 32000;
  bool attention_bias = false;
  std::string attn_implementation = "sdpa";
  bool z_loss_enabled = false;
  double z_loss_coefficient = 1e-4;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  int64_t q_features() const { return num_attention_heads * head_dim(); }
  int64_t kv_features() const { return num_key_value_heads * head_dim(); }
  RopeOptions rope() const { return {head_dim(), rope_theta, max_position_embeddings, rope_scaling}; }
  // Pipeline blocks: embedding, one per decoder layer, final norm + lm_head + loss.
  int64_t num_blocks() const { return num_hidden_layers + 2; }
  int head_block() const { return static_cast<int>(num_hidden_layers + 1); }

  // Reads and validates every key of `reader` (a model.model_config mapping), then calls
  // reader.finish(): an unknown key, a wrong type or an impossible value is a ConfigError naming
  // the key's path. Defaults are recorded into reader.resolved().
  static LlamaConfig read(ConfigReader& reader);
};

// Forward FLOPs per token of each pipeline block (PaLM convention: 2 per multiply-add, attention
// scores without causal discount; the norms are not counted).
std::vector<double> llama_block_costs(const LlamaConfig& config, int64_t sequence_length);

}  // namespace triax::llama
