// model.model_config of a dense Qwen2 model (nanotron's Qwen2Config without moe_config), read
// strictly. It is the Llama decoder's config with Qwen2's meanings:
//   - attention_bias puts biases on q, k and v, not on o_proj (Hugging Face's Qwen2Attention);
//   - is_qwen2_config is the marker, and moe_config must be null or absent (the moe plugin's);
//   - a tokens.sequence_length beyond max_position_embeddings extends the rotary tables, as
//     nanotron and Hugging Face compute RoPE for any position (nanotron's own example trains
//     8192 tokens with max_position_embeddings 256).
// The shared position keys (rope_interleaved, no_rope_layer, z-loss, implementation hints) are
// DecoderConfig::read_position_keys's.
#pragma once

#include "llama_config.hpp"
#include "triax/config_reader.hpp"

namespace triax::qwen2 {

// Reads and validates every key of `reader`, then calls reader.finish(); defaults are recorded
// into reader.resolved().
llama::LlamaConfig read_qwen2_config(ConfigReader& reader);

// How a dense Qwen decoder's plugin is named in its config: its nanotron marker, its name, and the
// plugin a moe_config belongs to.
struct DenseQwenNames {
  const char* marker;
  const char* plugin;
  const char* moe_plugin;
};
// The keys of a dense Qwen decoder (Qwen2's, or Qwen3's: the qwen3 plugin) into `c`, whose
// attention flags (attention_bias_on_output, qk_norm, reads_head_dim) the caller set; then
// reader.finish() and the size checks.
void read_dense_qwen_keys(ConfigReader& reader, llama::LlamaConfig& c, const DenseQwenNames& names);

}  // namespace triax::qwen2
