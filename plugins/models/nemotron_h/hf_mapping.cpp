// The Nemotron-H model's Hugging Face mapping (NemotronHForCausalLM). model_config's keys are
// config.json's, so config.json translates through one table; the pattern is config.json's
// layers_block_type (transformers' own save) or hybrid_override_pattern (older configs), written
// back as layers_block_type. config.json's num_hidden_layers is not read: transformers derives it
// from the pattern too. transformers' NemotronHForCausalLM never ties lm_head to the embedding
// (whatever config.json's tie_word_embeddings says): an import is untied, and a tied model is
// refused on export. NemotronHConfig::read, the plugin's one reader, validates both directions.
#include <nlohmann/json.hpp>

#include <string>
#include <utility>

#include "layer_kinds.hpp"
#include "nemotron_h_model.hpp"
#include "ssm_backbone.hpp"

namespace triax::nemotron_h {
namespace {

using Json = nlohmann::json;
constexpr const char* kArchitecture = "NemotronHForCausalLM";

const std::vector<HfConfigKey> kModelKeys = {{"vocab_size", HfValue::Integer},
                                             {"hidden_size", HfValue::Integer},
                                             {"num_attention_heads", HfValue::Integer},
                                             {"num_key_value_heads", HfValue::Integer},
                                             {"head_dim", HfValue::Integer},
                                             {"intermediate_size", HfValue::Integer},
                                             {"mlp_bias", HfValue::Boolean},
                                             {"mamba_num_heads", HfValue::Integer},
                                             {"mamba_head_dim", HfValue::Integer},
                                             {"ssm_state_size", HfValue::Integer},
                                             {"n_groups", HfValue::Integer},
                                             {"conv_kernel", HfValue::Integer},
                                             {"chunk_size", HfValue::Integer},
                                             {"use_bias", HfValue::Boolean},
                                             {"use_conv_bias", HfValue::Boolean},
                                             {"time_step_min", HfValue::Number},
                                             {"time_step_max", HfValue::Number},
                                             {"time_step_floor", HfValue::Number},
                                             {"layer_norm_epsilon", HfValue::Number},
                                             {"residual_in_fp32", HfValue::Boolean},
                                             {"bos_token_id", HfValue::TokenId},
                                             {"eos_token_id", HfValue::TokenId},
                                             {"pad_token_id", HfValue::TokenId}};
// The E layers' keys, carried only for a pattern with E (model_config knows them only then).
const std::vector<HfConfigKey> kMoeKeys = {{"n_routed_experts", HfValue::Integer},
                                           {"num_experts_per_tok", HfValue::Integer},
                                           {"moe_intermediate_size", HfValue::Integer},
                                           {"moe_shared_expert_intermediate_size", HfValue::Integer},
                                           {"moe_latent_size", HfValue::Integer},
                                           {"n_group", HfValue::Integer},
                                           {"topk_group", HfValue::Integer},
                                           {"norm_topk_prob", HfValue::Boolean},
                                           {"routed_scaling_factor", HfValue::Number}};

// transformers' layer type names, by pattern letter.
const std::vector<std::pair<char, std::string>> kLayerTypes = {
    {'M', "linear_attention"}, {'*', "full_attention"}, {'-', "mlp"}, {'E', "moe"}};

std::string pattern_from_hf(ConfigReader& hf) {
  const YAML::Node types = hf.raw("layers_block_type");
  if (!types.IsDefined() || types.IsNull()) return hf.required<std::string>("hybrid_override_pattern");
  if (!types.IsSequence()) hf.fail("layers_block_type", "expected a list of layer types");
  std::string pattern;
  for (const YAML::Node& type : types) {
    const std::string name = type.IsScalar() ? type.Scalar() : "";
    char letter = 0;
    for (const auto& [l, known] : kLayerTypes)
      if (known == name) letter = l;
    if (letter == 0)
      hf.fail("layers_block_type", "unknown layer type '" + name + "' (linear_attention, full_attention, mlp or moe)");
    pattern.push_back(letter);
  }
  return pattern;
}

YAML::Node config_from_hf(ConfigReader& hf) {
  require_hf_architecture(hf, {kArchitecture});
  require_hf_value(hf, "model_type", "nemotron_h",
                   "the nemotron_h plugin reads Nemotron-H models (model_type nemotron_h)");
  require_hf_value(hf, "mlp_hidden_act", "relu2", "triax's nemotron_h MLP uses relu2");
  require_hf_value(hf, "mamba_hidden_act", "silu", "triax's Mamba-2 mixer uses SiLU");
  YAML::Node m(YAML::NodeType::Map);
  const std::string pattern = pattern_from_hf(hf);
  m["hybrid_override_pattern"] = pattern;
  hf_keys_to_model_config(hf, kModelKeys, m);
  if (pattern.find('E') != std::string::npos) hf_keys_to_model_config(hf, kMoeKeys, m);
  // The reader's refusals name config.json and the key.
  ConfigReader check(YAML::Clone(m), "", "config.json");
  NemotronHConfig::read(check);
  return m;
}

std::string config_to_hf(ConfigReader& model_config, const std::string& dtype) {
  const NemotronHConfig c = NemotronHConfig::read(model_config);
  if (c.tie_word_embeddings)
    model_config.fail("tie_word_embeddings",
                      "is true, but transformers' NemotronHForCausalLM has its own lm_head "
                      "(it never ties it to the embedding): export a model trained untied");
  Json types = Json::array();
  for (char letter : c.hybrid_override_pattern)
    for (const auto& [l, name] : kLayerTypes)
      if (l == letter) types.push_back(name);
  Json json = {{"architectures", Json::array({kArchitecture})},
               {"model_type", "nemotron_h"},
               {"layers_block_type", types},
               {"num_hidden_layers", c.num_hidden_layers},
               {"mlp_hidden_act", "relu2"},
               {"mamba_hidden_act", "silu"},
               {"tie_word_embeddings", false},
               {"use_cache", true},
               {"torch_dtype", dtype}};
  model_config_keys_to_hf(model_config.resolved(), kModelKeys, json);
  if (c.moe_block) model_config_keys_to_hf(model_config.resolved(), kMoeKeys, json);
  return json.dump(2) + "\n";
}

// Hugging Face's folders name the tensors backbone.* (transformers renames them to model.* as it
// loads, and back as it saves); the mixers' rules by each layer's letter, in layer order.
std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  const NemotronHConfig c = NemotronHConfig::read(model_config);
  int64_t layer = 0;
  return mamba::ssm_backbone_rules(c.vocab_size, c.hidden_size, c.num_hidden_layers, c.tie_word_embeddings,
                                   [&](std::vector<HfTensorRule>& rules, const std::string& mixer) {
                                     layer_kind(c.letter(layer++)).add_hf_rules(c, rules, mixer);
                                   });
}

}  // namespace

HfMapping NemotronHModel::hf_mapping() { return {{kArchitecture}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::nemotron_h
