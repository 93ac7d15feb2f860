// The Llama model's Hugging Face mapping (LlamaForCausalLM). nanotron's LlamaConfig keeps Hugging
// Face's key names and triax's parameter names are Hugging Face's but for the fused q/k/v and
// gate/up projections, so most of it is a table; LlamaConfig::read, the plugin's one reader,
// validates both directions. Both rotate halves of each head for RoPE: the q/k projections need
// no permutation.
#include <nlohmann/json.hpp>

#include "decoder_hf.hpp"
#include "llama_model.hpp"
#include "triax/layers/swiglu_mlp.hpp"

namespace triax::llama {
namespace {

using Json = nlohmann::json;
constexpr const char* kArchitecture = "LlamaForCausalLM";

// Keys config.json and model_config share, in both directions: the decoder's, and two of Llama's.
std::vector<HfConfigKey> shared_keys() {
  std::vector<HfConfigKey> keys = decoder_hf_keys();
  keys.push_back({"pretraining_tp", HfValue::Integer});
  keys.push_back({"attention_bias", HfValue::Boolean});
  return keys;
}
const std::vector<HfConfigKey> kSharedKeys = shared_keys();

}  // namespace

// rope_scaling (transformers 4) or rope_parameters (5) -> model_config.rope_scaling (null: plain).
YAML::Node rope_scaling_from_hf(ConfigReader& rope) {
  std::optional<std::string> type = rope.optional<std::string>("rope_type");
  const char* type_key = type ? "rope_type" : "type";
  if (!type) type = rope.optional<std::string>("type");
  const std::string name = type.value_or("default");
  if (name == "default") return YAML::Node(YAML::NodeType::Null);
  if (name != "linear" && name != "llama3")
    rope.fail(type_key, "'" + name + "' RoPE is not supported by triax's llama (supported: default, linear, llama3)");
  YAML::Node out(YAML::NodeType::Map);
  out["rope_type"] = name;
  std::vector<HfConfigKey> keys = {{"factor", HfValue::Number}};
  if (name == "llama3")
    keys.insert(keys.end(), {{"low_freq_factor", HfValue::Number},
                             {"high_freq_factor", HfValue::Number},
                             {"original_max_position_embeddings", HfValue::Integer}});
  hf_keys_to_model_config(rope, keys, out);
  return out;
}

void rope_from_hf(ConfigReader& hf, YAML::Node& m) {
  if (std::optional<ConfigReader> parameters = hf.optional_section("rope_parameters")) {
    if (hf.contains("rope_scaling")) hf.fail("rope_scaling", "given together with rope_parameters: give one of them");
    const double theta = parameters->required<double>("rope_theta");
    if (m["rope_theta"] && m["rope_theta"].as<double>() != theta)
      hf.fail("rope_theta", "disagrees with rope_parameters.rope_theta " + yaml_number(theta));
    m["rope_theta"] = yaml_number(theta);
    m["rope_scaling"] = rope_scaling_from_hf(*parameters);
  } else if (std::optional<ConfigReader> scaling = hf.optional_section("rope_scaling")) {
    m["rope_scaling"] = rope_scaling_from_hf(*scaling);
  }
}

void rope_to_hf(const LlamaConfig& c, nlohmann::json& json) {
  json["rope_scaling"] = nullptr;
  if (!c.rope_scaling) return;
  json["rope_scaling"] = {{"rope_type", c.rope_scaling->type}, {"factor", c.rope_scaling->factor}};
  if (c.rope_scaling->type == "llama3") {
    json["rope_scaling"]["low_freq_factor"] = c.rope_scaling->low_freq_factor;
    json["rope_scaling"]["high_freq_factor"] = c.rope_scaling->high_freq_factor;
    json["rope_scaling"]["original_max_position_embeddings"] = c.rope_scaling->original_max_position_embeddings;
  }
}

void qwen_window_to_hf(const LlamaConfig& c, nlohmann::json& json) {
  json["use_sliding_window"] = c.sliding_window_size.has_value();
  json["sliding_window"] = c.sliding_window_size ? Json(*c.sliding_window_size) : Json(nullptr);
  // nanotron windows every layer: layer_types says so to every transformers version that reads it.
  json["max_window_layers"] = c.sliding_window_size ? 0 : c.num_hidden_layers;
  const char* attention = c.sliding_window_size ? "sliding_attention" : "full_attention";
  json["layer_types"] = Json(std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers), attention));
}

void refuse_hf_rotary_layout(ConfigReader& model_config, const LlamaConfig& c, const std::string& architecture) {
  if (c.rope_interleaved)
    model_config.fail("rope_interleaved", "true (GPT-J rotary pairs) cannot be exported: " + architecture +
                                              " rotates halves of each head");
}

namespace {

YAML::Node config_from_hf(ConfigReader& hf) {
  require_hf_architecture(hf, {kArchitecture});
  require_hf_value(hf, "model_type", "llama", "the llama plugin reads Llama models");
  require_hf_value(hf, "mlp_bias", "false", "triax's llama MLP has no biases");
  require_hf_value(hf, "attention_dropout", "0.0", "triax's llama has no attention dropout");
  YAML::Node m(YAML::NodeType::Map);
  m["is_llama_config"] = true;
  m["rope_interleaved"] = false;  // Hugging Face rotates halves
  m["rope_scaling"] = YAML::Node(YAML::NodeType::Null);
  hf_keys_to_model_config(hf, kSharedKeys, m);
  hf_keys_to_model_config(hf, {{"rope_interleaved", HfValue::Boolean}}, m);
  rope_from_hf(hf, m);
  // The reader's refusals name config.json and the key (the names are the same on both sides).
  ConfigReader check(m, "", "config.json");
  LlamaConfig::read(check).check_hf_head_dim(hf, "llama");
  return m;
}

std::string config_to_hf(ConfigReader& model_config, const std::string& dtype) {
  const LlamaConfig c = LlamaConfig::read(model_config);
  if (c.sliding_window_size)
    model_config.fail("sliding_window_size", "cannot be exported: Hugging Face's Llama has no sliding window (null "
                                             "expected; the moe plugin exports it as Mixtral's or Qwen2-MoE's)");
  refuse_hf_rotary_layout(model_config, c, kArchitecture);
  if (c.no_rope_layer)
    model_config.fail("no_rope_layer", "layers without RoPE cannot be exported to " + std::string(kArchitecture) +
                                           " (the qwen2 plugin exports them as SmolLM3ForCausalLM)");
  Json json = {{"architectures", Json::array({kArchitecture})},
               {"model_type", "llama"},
               {"attention_dropout", 0.0},
               {"mlp_bias", false},
               {"head_dim", c.head_dim()},
               {"torch_dtype", dtype}};
  model_config_keys_to_hf(model_config.resolved(), kSharedKeys, json);
  rope_to_hf(c, json);
  return json.dump(2) + "\n";
}

std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  return llama_tensor_rules(LlamaConfig::read(model_config));
}

}  // namespace

std::vector<HfTensorRule> llama_tensor_rules(const LlamaConfig& c) {
  const int64_t h = c.hidden_size, ffn = c.intermediate_size;
  std::vector<HfTensorRule> rules;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    rules.push_back(HfTensorRule::rename(name, std::move(shape)));
  };
  add("model.embed_tokens.weight", {c.vocab_size, h});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    add(layer + "input_layernorm.weight", {h});
    c.add_hf_attention_rules(rules, layer + "self_attn.");
    add(layer + "post_attention_layernorm.weight", {h});
    rules.push_back(SwiGluMlp::hf_rule(layer + "mlp.", h, ffn));
    add(layer + "mlp.down_proj.weight", {h, ffn});
  }
  c.add_hf_final_rules(rules);
  return rules;
}

HfMapping LlamaModel::hf_mapping() { return {{kArchitecture}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::llama
