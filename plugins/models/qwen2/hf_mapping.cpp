// The qwen2 model's Hugging Face mappings: Qwen2ForCausalLM (q/k/v biases always, every layer
// rotary) and SmolLM3ForCausalLM (the same decoder without biases, with NoPE layers). Key names,
// RoPE settings and tensors are the Llama model's (decoder_hf.hpp); what differs is which
// architecture a model config is and its NoPE layers.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "decoder_hf.hpp"
#include "qwen2_model.hpp"

namespace triax::qwen2 {
namespace {

using Json = nlohmann::json;
constexpr const char* kQwen2 = "Qwen2ForCausalLM";
constexpr const char* kSmolLm3 = "SmolLM3ForCausalLM";

bool names_architecture(ConfigReader& hf, const char* architecture) {
  const std::vector<std::string> found = hf.get<std::vector<std::string>>("architectures", {});
  return std::find(found.begin(), found.end(), architecture) != found.end();
}

// SmolLM3's no_rope_layers (1: RoPE, 0: NoPE, per layer) or, without it, no_rope_layer_interval
// (transformers' default 4) -> no_rope_layer: every N-th layer (1-based) NoPE, or null.
YAML::Node no_rope_layer_from_hf(ConfigReader& hf, int64_t layers) {
  std::vector<int64_t> uses_rope = hf.get<std::vector<int64_t>>("no_rope_layers", {});
  if (uses_rope.empty()) {
    const int64_t interval = hf.get<int64_t>("no_rope_layer_interval", 4);
    if (interval <= 0) hf.fail("no_rope_layer_interval", "must be positive, got " + std::to_string(interval));
    for (int64_t i = 0; i < layers; ++i) uses_rope.push_back((i + 1) % interval != 0 ? 1 : 0);
  }
  if (static_cast<int64_t>(uses_rope.size()) != layers)
    hf.fail("no_rope_layers", "holds " + std::to_string(uses_rope.size()) + " entries for num_hidden_layers " +
                                  std::to_string(layers));
  const auto first_nope = std::find(uses_rope.begin(), uses_rope.end(), 0);
  if (first_nope == uses_rope.end()) return YAML::Node(YAML::NodeType::Null);
  const int64_t interval = (first_nope - uses_rope.begin()) + 1;
  for (int64_t i = 0; i < layers; ++i)
    if ((uses_rope[static_cast<size_t>(i)] == 0) != ((i + 1) % interval == 0))
      hf.fail("no_rope_layers", "layer " + std::to_string(i) + " breaks the pattern of one layer without RoPE in " +
                                    std::to_string(interval) + ": triax's no_rope_layer is an interval");
  return YAML::Node(interval);
}

YAML::Node config_from_hf(ConfigReader& hf) {
  require_hf_architecture(hf, {kQwen2, kSmolLm3});
  const bool smollm3 = names_architecture(hf, kSmolLm3);
  require_hf_value(hf, "model_type", smollm3 ? "smollm3" : "qwen2", "the architecture and model_type disagree");
  require_hf_value(hf, "attention_dropout", "0.0", "triax's qwen2 has no attention dropout");
  YAML::Node m(YAML::NodeType::Map);
  m["is_qwen2_config"] = true;
  m["rope_interleaved"] = false;  // Hugging Face rotates halves
  m["rope_scaling"] = YAML::Node(YAML::NodeType::Null);
  hf_keys_to_model_config(hf, decoder_hf_keys(), m);
  // SmolLM3's default windows only its NoPE layers: there, layer_types must say every layer.
  if (const std::optional<int64_t> window =
          sliding_window_from_hf(hf, smollm3 ? HfWindowKeys::Qwen2Moe : HfWindowKeys::Qwen2))
    m["sliding_window_size"] = *window;
  if (smollm3) {
    require_hf_value(hf, "mlp_bias", "false", "triax's qwen2 MLP has no biases");
    require_hf_value(hf, "attention_bias", "false",
                     "SmolLM3's attention_bias also puts a bias on o_proj; triax's qwen2 has q/k/v biases only");
    m["attention_bias"] = false;
    m["no_rope_layer"] = no_rope_layer_from_hf(hf, hf.required<int64_t>("num_hidden_layers"));
  } else {
    m["attention_bias"] = true;  // Qwen2's q, k and v projections always have biases
  }
  llama::rope_from_hf(hf, m);
  // The reader's refusals name config.json and the key.
  ConfigReader check(m, "", "config.json");
  read_qwen2_config(check).check_hf_head_dim(hf, "qwen2");
  return m;
}

// Qwen2ForCausalLM when it can hold the model (biases, every layer rotary), SmolLM3ForCausalLM
// otherwise (no biases; NoPE layers or none).
std::string config_to_hf(ConfigReader& model_config, const std::string& dtype) {
  const llama::LlamaConfig c = read_qwen2_config(model_config);
  const bool smollm3 = c.no_rope_layer.has_value() || !c.attention_bias;
  const char* architecture = smollm3 ? kSmolLm3 : kQwen2;
  llama::refuse_hf_rotary_layout(model_config, c, architecture);
  if (smollm3 && c.attention_bias)
    model_config.fail("attention_bias", "true with no_rope_layer cannot be exported: Qwen2ForCausalLM has no NoPE "
                                        "layers, and SmolLM3ForCausalLM's attention_bias also puts a bias on o_proj");
  Json json = {{"architectures", Json::array({architecture})},
               {"model_type", smollm3 ? "smollm3" : "qwen2"},
               {"attention_dropout", 0.0},
               {"head_dim", c.head_dim()},
               {"torch_dtype", dtype}};
  model_config_keys_to_hf(model_config.resolved(), decoder_hf_keys(), json);
  llama::rope_to_hf(c, json);
  if (smollm3) {
    json["attention_bias"] = false;
    json["mlp_bias"] = false;
    Json uses_rope = Json::array();
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) uses_rope.push_back(c.uses_rope(i) ? 1 : 0);
    json["no_rope_layers"] = uses_rope;
    if (c.no_rope_layer) json["no_rope_layer_interval"] = *c.no_rope_layer;
  }
  llama::qwen_window_to_hf(c, json);
  return json.dump(2) + "\n";
}

std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  return llama::llama_tensor_rules(read_qwen2_config(model_config));
}

}  // namespace

HfMapping Qwen2Model::hf_mapping() { return {{kQwen2, kSmolLm3}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::qwen2
