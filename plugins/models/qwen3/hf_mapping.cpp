// The qwen3 model's Hugging Face mapping: Qwen3ForCausalLM. Key names, RoPE settings and tensors
// are the Llama model's (decoder_hf.hpp) plus head_dim and each layer's q_norm and k_norm; the
// sliding window is said as in Qwen2's config.json.
#include <nlohmann/json.hpp>

#include "decoder_hf.hpp"
#include "qwen3_model.hpp"

namespace triax::qwen3 {
namespace {

using Json = nlohmann::json;
constexpr const char* kQwen3 = "Qwen3ForCausalLM";
// transformers' Qwen3Config gives each head 128 features when config.json names no head_dim.
constexpr int64_t kHfDefaultHeadDim = 128;

YAML::Node config_from_hf(ConfigReader& hf) {
  require_hf_architecture(hf, {kQwen3});
  require_hf_value(hf, "model_type", "qwen3", "the architecture and model_type disagree");
  require_hf_value(hf, "attention_dropout", "0.0", "triax's qwen3 has no attention dropout");
  YAML::Node m(YAML::NodeType::Map);
  m["is_qwen3_config"] = true;
  m["rope_interleaved"] = false;  // Hugging Face rotates halves
  m["rope_scaling"] = YAML::Node(YAML::NodeType::Null);
  hf_keys_to_model_config(hf, qwen3_decoder_hf_keys(), m);
  if (!m["head_dim"]) m["head_dim"] = kHfDefaultHeadDim;
  if (const std::optional<int64_t> window = sliding_window_from_hf(hf, HfWindowKeys::Qwen2))
    m["sliding_window_size"] = *window;
  llama::rope_from_hf(hf, m);
  // The reader's refusals name config.json and the key (the names are the same on both sides).
  ConfigReader check(m, "", "config.json");
  read_qwen3_config(check);
  return m;
}

std::string config_to_hf(ConfigReader& model_config, const std::string& dtype) {
  const llama::LlamaConfig c = read_qwen3_config(model_config);
  llama::refuse_hf_rotary_layout(model_config, c, kQwen3);
  if (c.no_rope_layer)
    model_config.fail("no_rope_layer", "layers without RoPE cannot be exported to " + std::string(kQwen3) +
                                           " (the qwen2 plugin exports them as SmolLM3ForCausalLM)");
  Json json = {{"architectures", Json::array({kQwen3})},
               {"model_type", "qwen3"},
               {"attention_dropout", 0.0},
               {"torch_dtype", dtype}};
  model_config_keys_to_hf(model_config.resolved(), qwen3_decoder_hf_keys(), json);
  llama::rope_to_hf(c, json);
  llama::qwen_window_to_hf(c, json);
  return json.dump(2) + "\n";
}

std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  return llama::llama_tensor_rules(read_qwen3_config(model_config));
}

}  // namespace

HfMapping Qwen3Model::hf_mapping() { return {{kQwen3}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::qwen3
