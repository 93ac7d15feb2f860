// The Mamba-2 model's Hugging Face mapping (Mamba2ForCausalLM). model_config's keys are
// config.json's, so config.json translates through one table; Mamba2Config::read, the plugin's one
// reader, validates both directions. The mixers' tensors follow mamba2_mixer_hf.hpp.
#include <nlohmann/json.hpp>

#include <cmath>

#include "mamba2_mixer_hf.hpp"
#include "mamba2_model.hpp"
#include "ssm_backbone.hpp"

namespace triax::mamba2 {
namespace {

using Json = nlohmann::json;
constexpr const char* kArchitecture = "Mamba2ForCausalLM";

const std::vector<HfConfigKey> kModelKeys = {
    {"vocab_size", HfValue::Integer},          {"hidden_size", HfValue::Integer},
    {"num_hidden_layers", HfValue::Integer},   {"num_heads", HfValue::Integer},
    {"head_dim", HfValue::Integer},            {"state_size", HfValue::Integer},
    {"n_groups", HfValue::Integer},            {"expand", HfValue::Integer},
    {"conv_kernel", HfValue::Integer},         {"chunk_size", HfValue::Integer},
    {"use_bias", HfValue::Boolean},            {"use_conv_bias", HfValue::Boolean},
    {"layer_norm_epsilon", HfValue::Number},   {"residual_in_fp32", HfValue::Boolean},
    {"time_step_min", HfValue::Number},        {"time_step_max", HfValue::Number},
    {"time_step_floor", HfValue::Number},      {"tie_word_embeddings", HfValue::Boolean},
    {"bos_token_id", HfValue::TokenId},        {"eos_token_id", HfValue::TokenId},
    {"pad_token_id", HfValue::TokenId}};

// transformers writes an infinite float as {"__float__": "Infinity"}.
bool is_infinity(const YAML::Node& value) {
  return value.IsMap() && value["__float__"].IsDefined() && value["__float__"].Scalar() == "Infinity";
}

// config.json's time_step_limit: [0, Infinity] (or absent) is no clamp, model_config's null;
// two finite numbers are a clamp; a lower limit alone has no model_config form.
void time_step_limit_from_hf(ConfigReader& hf, YAML::Node& model_config) {
  const YAML::Node limit = hf.raw("time_step_limit");
  if (!limit.IsDefined() || limit.IsNull()) return;
  if (!limit.IsSequence() || limit.size() != 2 || !limit[0].IsScalar())
    hf.fail("time_step_limit", "expected [low, high]");
  if (is_infinity(limit[1])) {
    if (limit[0].as<double>() != 0.0)
      hf.fail("time_step_limit", "a lower limit without an upper one is not supported (use [0.0, Infinity])");
    return;
  }
  YAML::Node pair(YAML::NodeType::Sequence);
  pair.push_back(limit[0]);
  pair.push_back(limit[1]);
  model_config["time_step_limit"] = pair;
}

YAML::Node config_from_hf(ConfigReader& hf) {
  require_hf_architecture(hf, {kArchitecture});
  require_hf_value(hf, "model_type", "mamba2", "the mamba2 plugin reads Mamba-2 models (model_type mamba2)");
  require_hf_value(hf, "hidden_act", "silu", "triax's mamba2 mixer uses SiLU");
  YAML::Node m(YAML::NodeType::Map);
  m["is_mamba2_config"] = true;
  hf_keys_to_model_config(hf, kModelKeys, m);
  time_step_limit_from_hf(hf, m);
  // The reader's refusals name config.json and the key.
  ConfigReader check(YAML::Clone(m), "", "config.json");
  Mamba2Config::read(check);
  return m;  // time_step_rank is a Mamba-1 setting Mamba2ForCausalLM does not use
}

std::string config_to_hf(ConfigReader& model_config, const std::string& dtype) {
  const Mamba2Config c = Mamba2Config::read(model_config);
  const Json high = std::isfinite(c.time_step_limit_high) ? Json(c.time_step_limit_high)
                                                          : Json{{"__float__", "Infinity"}};
  Json json = {{"architectures", Json::array({kArchitecture})},
               {"model_type", "mamba2"},
               {"hidden_act", "silu"},
               {"time_step_limit", Json::array({c.time_step_limit_low, high})},
               {"use_cache", true},
               {"torch_dtype", dtype}};
  model_config_keys_to_hf(model_config.resolved(), kModelKeys, json);
  return json.dump(2) + "\n";
}

std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  const Mamba2Config c = Mamba2Config::read(model_config);
  return mamba::ssm_backbone_rules(
      c.vocab_size, c.hidden_size, c.num_hidden_layers, c.tie_word_embeddings,
      [&](std::vector<HfTensorRule>& rules, const std::string& mixer) { add_mamba2_mixer_rules(c, rules, mixer); });
}

}  // namespace

HfMapping Mamba2Model::hf_mapping() { return {{kArchitecture}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::mamba2
