// The dense Qwen2 model (Hugging Face Qwen2ForCausalLM; with NoPE layers SmolLM3ForCausalLM) as a
// triax model plugin: the llama plugin's LlamaModel (the SDK's PreNormDecoderLayer around a
// SwiGluMlp) built from a Qwen2 config (qwen2_config.hpp). Parameter names are the Llama model's,
// with self_attn.qkv_proj.bias when attention_bias is true and no o_proj bias.
#pragma once

#include <memory>
#include <vector>

#include "llama_model.hpp"
#include "qwen2_config.hpp"

namespace triax::qwen2 {

class Qwen2Model : public llama::LlamaModel {
 public:
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  static std::shared_ptr<Qwen2Model> create(ConfigReader& config, const ModelContext& context);
  // nanotron's Qwen2Config; the moe plugin takes it when moe_config is given.
  static constexpr const char* kNanotronMarker = "is_qwen2_config";
  static int64_t vocab_size(ConfigReader& config) { return read_qwen2_config(config).vocab_size; }
  static HfMapping hf_mapping();  // Qwen2ForCausalLM, SmolLM3ForCausalLM (hf_mapping.cpp)

  Qwen2Model(const llama::LlamaConfig& config, const ModelContext& context, std::string resolved_yaml)
      : LlamaModel(config, context, std::move(resolved_yaml), "qwen2") {}
};

}  // namespace triax::qwen2
