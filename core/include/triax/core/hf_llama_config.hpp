// A Llama model's configuration between its two spellings: a Hugging Face config.json
// (LlamaForCausalLM, as transformers 4.x and 5.x write it) and triax's llama `model.model_config`
// (the keys plugins/models/llama/llama_config.cpp accepts). Only what both sides can represent
// passes; anything else is refused with the file or key that says it.
#pragma once

#include <c10/core/ScalarType.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace triax {

struct HfLlamaConfig {
  // rope_scaling; absent means plain RoPE (Hugging Face's rope_type "default").
  struct RopeScaling {
    std::string type;  // "linear" or "llama3"
    double factor = 1.0;
    // llama3 only
    double low_freq_factor = 1.0;
    double high_freq_factor = 4.0;
    int64_t original_max_position_embeddings = 8192;
  };

  // Defaults: Hugging Face's LlamaConfig (the same as triax's llama plugin).
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;
  int64_t vocab_size = 32000;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  double initializer_range = 0.02;
  std::optional<int64_t> bos_token_id = 1;  // null in config.json: no such token
  std::optional<int64_t> eos_token_id = 2;
  std::optional<int64_t> pad_token_id;
  int64_t pretraining_tp = 1;
  bool use_cache = true;
  // config.json's torch_dtype (transformers 4.x) or dtype (5.x), when it names one.
  std::optional<at::ScalarType> dtype;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }

  // Reads config.json. Refuses another architecture or model_type, an activation other than
  // silu, mlp_bias true, a head_dim other than hidden_size / num_attention_heads, a RoPE scaling
  // other than default/linear/llama3, attention_dropout other than 0, several eos tokens; every
  // error names the file and the key. Keys LlamaForCausalLM does not read are ignored (a warning
  // lists those not known to be harmless).
  static HfLlamaConfig from_config_json(const std::string& path);
  // config.json for LlamaForCausalLM, with torch_dtype `dtype`, rope_theta and rope_scaling in the
  // form both transformers 4.x and 5.x read.
  std::string to_config_json(at::ScalarType dtype) const;
  // generation_config.json: the bos, eos and pad token ids.
  std::string to_generation_config_json() const;

  // Reads a triax llama model_config (a YAML mapping) strictly: an unknown key or a wrong type is a
  // ConfigError naming model.model_config.<key>; absent keys take the plugin's defaults.
  // rope_interleaved: true is refused (Hugging Face Llama rotates halves).
  static HfLlamaConfig from_model_config(const YAML::Node& model_config);
  // The model_config that the llama plugin reads back to this configuration; every key explicit.
  YAML::Node to_model_config() const;

  // Every tensor of the model with its shape, in model order: model.embed_tokens.weight, then per
  // layer model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj (+ bias), post_attention_layernorm,
  // mlp.{gate,up,down}_proj}, model.norm.weight, and lm_head.weight unless tied.
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensor_shapes() const;
};

}  // namespace triax
