// The Qwen3-MoE model (Hugging Face Qwen3MoeForCausalLM) as a triax model plugin: the moe
// plugin's MoeModel read as a Qwen3 config (MoeFamily::qwen3): is_qwen3_config with a
// moe_config, every layer's attention with qk-norm and head_dim (default hidden_size /
// num_attention_heads), attention_bias on all four projections. Qwen3-MoE routes each token to
// top_k of many experts (moe_config.norm_topk_prob renormalises their gates) and has no shared
// expert; the plugin trains one when enable_shared_expert is set, but cannot export it.
// Parameter names are the moe model's, with each layer's self_attn.q_norm.weight and
// self_attn.k_norm.weight [head_dim].
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "moe_model.hpp"

namespace triax::qwen3_moe {

// model.model_config read strictly; defaults recorded into reader.resolved().
inline moe::MoeConfig read_qwen3_moe_config(ConfigReader& reader) {
  return moe::MoeConfig::read(reader, moe::MoeFamily::qwen3());
}

class Qwen3MoeModel : public moe::MoeModel {
 public:
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  static std::shared_ptr<Qwen3MoeModel> create(ConfigReader& config, const ModelContext& context);
  // The qwen3 plugin's marker; a moe_config makes the model this plugin's.
  static constexpr const char* kNanotronMarker = "is_qwen3_config";
  static constexpr const char* kNanotronMarkerRequires = "moe_config";
  static int64_t vocab_size(ConfigReader& config) { return read_qwen3_moe_config(config).vocab_size; }
  static HfMapping hf_mapping();  // Qwen3MoeForCausalLM (hf_mapping.cpp)

  Qwen3MoeModel(const moe::MoeConfig& config, const ModelContext& context, std::string resolved_yaml)
      : MoeModel(config, context, std::move(resolved_yaml), "qwen3_moe") {}
};

}  // namespace triax::qwen3_moe
