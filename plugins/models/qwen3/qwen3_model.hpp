// The dense Qwen3 model (Hugging Face Qwen3ForCausalLM) as a triax model plugin: the llama
// plugin's LlamaModel (the SDK's PreNormDecoderLayer around a SwiGluMlp) built from a Qwen3 config
// (qwen3_config.hpp). Parameter names are the Llama model's, with each layer's
// self_attn.q_norm.weight and self_attn.k_norm.weight [head_dim].
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "llama_model.hpp"
#include "qwen3_config.hpp"

namespace triax::qwen3 {

class Qwen3Model : public llama::LlamaModel {
 public:
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  static std::shared_ptr<Qwen3Model> create(ConfigReader& config, const ModelContext& context);
  // The qwen3_moe plugin takes the same marker when moe_config is given.
  static constexpr const char* kNanotronMarker = "is_qwen3_config";
  static int64_t vocab_size(ConfigReader& config) { return read_qwen3_config(config).vocab_size; }
  static HfMapping hf_mapping();  // Qwen3ForCausalLM (hf_mapping.cpp)

  Qwen3Model(const llama::LlamaConfig& config, const ModelContext& context, std::string resolved_yaml)
      : LlamaModel(config, context, std::move(resolved_yaml), "qwen3") {}
};

}  // namespace triax::qwen3
