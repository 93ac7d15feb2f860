// The Mamba model's Hugging Face mapping (MambaForCausalLM). Hugging Face names the mixer's
// settings apart from nanotron's ssm_cfg (state_size = d_state, conv_kernel = d_conv,
// time_step_* = dt_*) and stores the vocabulary already padded, so config.json translates key by
// key through two tables; MambaConfig::read, the plugin's one reader, validates both directions.
// Parameter names are Hugging Face's; in_proj.weight is [2, d_inner, d_model] here (so that a
// tensor-parallel rank's x and z rows are one slice) and [2 * d_inner, d_model] there.
#include <nlohmann/json.hpp>

#include "mamba_model.hpp"
#include "ssm_backbone.hpp"

namespace triax::mamba {
namespace {

using Json = nlohmann::json;
constexpr const char* kArchitecture = "MambaForCausalLM";

// config.json keys and the model_config keys holding the same values.
const std::vector<HfConfigKey> kModelKeys = {
    {"vocab_size", HfValue::Integer},
    {"hidden_size", HfValue::Integer, "d_model"},
    {"num_hidden_layers", HfValue::Integer},
    {"layer_norm_epsilon", HfValue::Number, "rms_norm_eps"},
    {"residual_in_fp32", HfValue::Boolean},
    {"tie_word_embeddings", HfValue::Boolean},
    {"bos_token_id", HfValue::TokenId},
    {"eos_token_id", HfValue::TokenId},
    {"pad_token_id", HfValue::TokenId}};
// ... and those of model_config.ssm_cfg.
const std::vector<HfConfigKey> kSsmKeys = {
    {"state_size", HfValue::Integer, "d_state"},
    {"conv_kernel", HfValue::Integer, "d_conv"},
    {"expand", HfValue::Integer},
    {"time_step_min", HfValue::Number, "dt_min"},
    {"time_step_max", HfValue::Number, "dt_max"},
    {"time_step_scale", HfValue::Number, "dt_scale"},
    {"time_step_floor", HfValue::Number, "dt_init_floor"},
    {"time_step_init_scheme", HfValue::String, "dt_init"},
    {"use_conv_bias", HfValue::Boolean, "conv_bias"},
    {"use_bias", HfValue::Boolean, "bias"}};

YAML::Node config_from_hf(ConfigReader& hf) {
  // Mamba-2 (multi-head SSD mixer, grouped B/C, gated norm) shares the model type's name only.
  for (const std::string& name : hf.get<std::vector<std::string>>("architectures", {}))
    if (name == "Mamba2ForCausalLM")
      hf.fail("architectures", "Mamba2ForCausalLM (Mamba-2) is not supported: the mamba plugin reads Mamba-1's " +
                                   std::string(kArchitecture));
  require_hf_architecture(hf, {kArchitecture});
  require_hf_value(hf, "model_type", "mamba", "the mamba plugin reads Mamba-1 models (model_type mamba)");
  require_hf_value(hf, "hidden_act", "silu", "triax's mamba mixer uses SiLU");
  YAML::Node m(YAML::NodeType::Map);
  m["is_mamba_config"] = true;
  m["pad_vocab_size_multiple"] = 1;  // config.json's vocab_size is the embedding's rows already
  hf_keys_to_model_config(hf, kModelKeys, m);
  YAML::Node ssm(YAML::NodeType::Map);
  hf_keys_to_model_config(hf, kSsmKeys, ssm);
  if (hf.contains("time_step_rank")) {
    const YAML::Node rank = hf.raw("time_step_rank");
    ssm["dt_rank"] = rank.IsScalar() && rank.Scalar() == "auto" ? YAML::Node("auto") : YAML::Node(rank.as<int64_t>());
  }
  m["ssm_cfg"] = ssm;
  // The reader's refusals name config.json and the model_config key.
  ConfigReader check(YAML::Clone(m), "", "config.json");
  const MambaConfig config = MambaConfig::read(check);
  if (std::optional<int64_t> inner = hf.optional<int64_t>("intermediate_size"); inner && *inner != config.d_inner())
    hf.fail("intermediate_size", std::to_string(*inner) + " does not match expand x hidden_size = " +
                                     std::to_string(config.ssm.expand) + " x " + std::to_string(config.d_model) +
                                     " = " + std::to_string(config.d_inner()) +
                                     " (Mamba's mixer width is expand x hidden_size)");
  return m;
}

std::string config_to_hf(ConfigReader& model_config, const std::string& dtype) {
  const MambaConfig c = MambaConfig::read(model_config);
  Json json = {{"architectures", Json::array({kArchitecture})},
               {"model_type", "mamba"},
               {"hidden_act", "silu"},
               {"intermediate_size", c.d_inner()},
               {"time_step_rank", c.dt_rank()},
               {"use_cache", true},
               {"torch_dtype", dtype}};
  model_config_keys_to_hf(model_config.resolved(), kModelKeys, json);
  model_config_keys_to_hf(model_config.resolved()["ssm_cfg"], kSsmKeys, json);
  json["vocab_size"] = c.model_vocab_size();  // the padded rows are real rows
  return json.dump(2) + "\n";
}

// in_proj: the HF tensor is the parameter with its first two dims merged.
HfTensorRule flattened(const std::string& name, std::vector<int64_t> shape) {
  HfTensorRule rule = HfTensorRule::rename(name, std::move(shape));
  rule.kind = TRIAX_HF_FLATTEN;
  rule.dim = 0;
  return rule;
}

std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  const MambaConfig c = MambaConfig::read(model_config);
  const int64_t h = c.d_model, d = c.d_inner(), n = c.ssm.d_state, r = c.dt_rank();
  return ssm_backbone_rules(c.model_vocab_size(), h, c.num_hidden_layers, c.tie_word_embeddings,
                            [&](std::vector<HfTensorRule>& rules, const std::string& mixer) {
                              auto add = [&](const std::string& name, std::vector<int64_t> shape) {
                                rules.push_back(HfTensorRule::rename(mixer + name, std::move(shape)));
                              };
                              add("A_log", {d, n});
                              add("D", {d});
                              add("conv1d.weight", {d, 1, c.ssm.d_conv});
                              if (c.ssm.conv_bias) add("conv1d.bias", {d});
                              rules.push_back(flattened(mixer + "in_proj.weight", {2, d, h}));
                              if (c.ssm.bias) rules.push_back(flattened(mixer + "in_proj.bias", {2, d}));
                              add("x_proj.weight", {r + 2 * n, d});
                              add("dt_proj.weight", {d, r});
                              add("dt_proj.bias", {d});
                              add("out_proj.weight", {h, d});
                              if (c.ssm.bias) add("out_proj.bias", {h});
                            });
}

}  // namespace

HfMapping MambaModel::hf_mapping() { return {{kArchitecture}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::mamba
