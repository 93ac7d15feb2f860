#include "llama_config.hpp"

#include <triax/config_checks.hpp>

namespace triax::llama {

LlamaConfig LlamaConfig::read(ConfigReader& reader) {
  LlamaConfig c;
  c.read_decoder_keys(reader);
  if (!reader.get<bool>("is_llama_config", true))
    reader.fail("is_llama_config", "the llama model plugin needs is_llama_config: true (or the key left out)");
  c.pretraining_tp = reader.get<int64_t>("pretraining_tp", c.pretraining_tp);
  c.read_position_keys(reader);
  reader.finish();
  c.check_sizes(reader);
  return c;
}

void LlamaConfig::check_sizes(const ConfigReader& reader) const {
  const LlamaConfig& c = *this;
  c.check_decoder_shape(reader);
  require_positive(reader, "pretraining_tp", c.pretraining_tp);
  const double h = static_cast<double>(c.hidden_size), layer = h * (2.0 * c.q_features() + 2.0 * c.kv_features()) +
                                                               3.0 * h * static_cast<double>(c.intermediate_size);
  check_parameter_count(reader, "hidden_size",
                        static_cast<double>(c.vocab_size) * h * (c.tie_word_embeddings ? 1.0 : 2.0) +
                            static_cast<double>(c.num_hidden_layers) * layer +
                            static_cast<double>(c.max_position_embeddings) * static_cast<double>(c.head_dim()),
                        "vocab_size, hidden_size, intermediate_size, num_hidden_layers, max_position_embeddings");
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
