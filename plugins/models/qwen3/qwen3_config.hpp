// model.model_config of a dense Qwen3 model, read strictly. Hugging Face's Qwen3Config has no
// nanotron counterpart; its keys follow nanotron's Qwen2Config (qwen2_config.hpp) with Qwen3's
// meanings:
//   - is_qwen3_config is the marker, and moe_config must be null or absent (the qwen3_moe plugin's);
//   - every layer normalises each head's q and k with an RMSNorm before RoPE (qk-norm), and
//     head_dim (default hidden_size / num_attention_heads) sets the features of each head;
//   - attention_bias puts biases on q, k, v and o_proj, as in Hugging Face's Qwen3Attention.
#pragma once

#include "llama_config.hpp"
#include "triax/config_reader.hpp"

namespace triax::qwen3 {

// Reads and validates every key of `reader`, then calls reader.finish(); defaults are recorded
// into reader.resolved().
llama::LlamaConfig read_qwen3_config(ConfigReader& reader);

}  // namespace triax::qwen3
