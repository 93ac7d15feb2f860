#include "llama_config.hpp"

#include <triax/config_checks.hpp>

#include <algorithm>

namespace triax::llama {

LlamaConfig LlamaConfig::read(ConfigReader& reader) {
  LlamaConfig c;
  c.bos_token_id = reader.get<int64_t>("bos_token_id", c.bos_token_id);
  c.eos_token_id = reader.get<int64_t>("eos_token_id", c.eos_token_id);
  c.hidden_act = reader.choice("hidden_act", {"silu"}, c.hidden_act);
  c.hidden_size = reader.get<int64_t>("hidden_size", c.hidden_size);
  c.initializer_range = reader.get<double>("initializer_range", c.initializer_range);
  c.intermediate_size = reader.get<int64_t>("intermediate_size", c.intermediate_size);
  if (!reader.get<bool>("is_llama_config", true))
    reader.fail("is_llama_config", "the llama model plugin needs is_llama_config: true (or the key left out)");
  c.max_position_embeddings = reader.get<int64_t>("max_position_embeddings", c.max_position_embeddings);
  c.num_attention_heads = reader.get<int64_t>("num_attention_heads", c.num_attention_heads);
  c.num_hidden_layers = reader.get<int64_t>("num_hidden_layers", c.num_hidden_layers);
  c.attention_bias = reader.get<bool>("attention_bias", c.attention_bias);
  std::optional<int64_t> kv_heads = reader.optional<int64_t>("num_key_value_heads");
  c.num_key_value_heads = kv_heads ? *kv_heads : c.num_attention_heads;
  reader.resolved()["num_key_value_heads"] = c.num_key_value_heads;
  c.pad_token_id = reader.optional<int64_t>("pad_token_id");
  c.pretraining_tp = reader.get<int64_t>("pretraining_tp", c.pretraining_tp);
  c.rms_norm_eps = reader.get<double>("rms_norm_eps", c.rms_norm_eps);
  c.rope_scaling = triax::read_rope_scaling(reader);
  c.rope_theta = reader.get<double>("rope_theta", c.rope_theta);
  c.rope_interleaved = reader.get<bool>("rope_interleaved", c.rope_interleaved);
  c.tie_word_embeddings = reader.get<bool>("tie_word_embeddings", c.tie_word_embeddings);
  c.use_cache = reader.get<bool>("use_cache", c.use_cache);
  c.vocab_size = reader.get<int64_t>("vocab_size", c.vocab_size);
  c.attn_implementation = reader.get<std::string>("_attn_implementation", c.attn_implementation);
  c.z_loss_enabled = reader.get<bool>("z_loss_enabled", c.z_loss_enabled);
  c.z_loss_coefficient = reader.get<double>("z_loss_coefficient", c.z_loss_coefficient);
  reader.finish();

  // Sizes.
  require_positive(reader, "hidden_size", c.hidden_size);
  require_positive(reader, "intermediate_size", c.intermediate_size);
  require_positive(reader, "num_attention_heads", c.num_attention_heads);
  require_positive(reader, "num_key_value_heads", c.num_key_value_heads);
  require_positive(reader, "num_hidden_layers", c.num_hidden_layers);
  require_positive(reader, "vocab_size", c.vocab_size);
  require_positive(reader, "max_position_embeddings", c.max_position_embeddings);
  require_positive(reader, "pretraining_tp", c.pretraining_tp);
  require_positive(reader, "rms_norm_eps", c.rms_norm_eps);
  require_positive(reader, "rope_theta", c.rope_theta);
  if (c.initializer_range < 0.0)
    reader.fail("initializer_range", "must not be negative, got " + std::to_string(c.initializer_range));
  check_attention_shape(reader, c.hidden_size, c.num_attention_heads, c.num_key_value_heads);
  const double h = static_cast<double>(c.hidden_size), layer = h * (2.0 * c.q_features() + 2.0 * c.kv_features()) +
                                                               3.0 * h * static_cast<double>(c.intermediate_size);
  check_parameter_count(reader, "hidden_size",
                        static_cast<double>(c.vocab_size) * h * (c.tie_word_embeddings ? 1.0 : 2.0) +
                            static_cast<double>(c.num_hidden_layers) * layer +
                            static_cast<double>(c.max_position_embeddings) * static_cast<double>(c.head_dim()),
                        "vocab_size, hidden_size, intermediate_size, num_hidden_layers, max_position_embeddings");

  // Values naming something this plugin does not implement.
  if (c.rope_interleaved)
    reader.fail("rope_interleaved",
                "true (GPT-J style interleaved rotary pairs) is not implemented; use false (Hugging Face "
                "rotate-half layout)");
  static const char* const kAttention[] = {"sdpa", "flash_attention_2", "flex_attention", "eager"};
  if (std::find(std::begin(kAttention), std::end(kAttention), c.attn_implementation) == std::end(kAttention))
    reader.fail("_attn_implementation",
                "'" + c.attn_implementation +
                    "' is not implemented (causal attention runs through scaled_dot_product_attention; "
                    "accepted: sdpa, flash_attention_2, flex_attention, eager)");
  if (c.z_loss_enabled) reader.fail("z_loss_enabled", "z-loss is not implemented; set false");
  return c;
}

std::vector<double> llama_block_costs(const LlamaConfig& c, int64_t sequence_length) {
  const double h = static_cast<double>(c.hidden_size);
  const double q = static_cast<double>(c.q_features());
  const double kv = static_cast<double>(c.kv_features());
  const double ffn = static_cast<double>(c.intermediate_size);
  const double seq = static_cast<double>(sequence_length);
  const double projections = h * (q + 2.0 * kv) + q * h;  // q, k, v, o
  const double mlp = 3.0 * h * ffn;                       // gate, up, down
  const double attention = 2.0 * seq * q;                 // QK^T and AV
  const double layer = 2.0 * projections + 2.0 * mlp + 2.0 * attention;
  std::vector<double> costs;
  costs.reserve(static_cast<size_t>(c.num_blocks()));
  costs.push_back(0.0);  // embedding lookup: no arithmetic
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) costs.push_back(layer);
  costs.push_back(2.0 * h * static_cast<double>(c.vocab_size));  // lm_head
  return costs;
}

}  // namespace triax::llama
