// The qwen3_moe model's Hugging Face mapping: Qwen3MoeForCausalLM. Its experts are one tensor each
// under Qwen2-MoE's names (mlp.experts.{j}.gate/up/down_proj, the layout transformers writes),
// without a shared expert; the attention adds head_dim and each layer's q_norm and k_norm.
#include <nlohmann/json.hpp>

#include "moe_hf.hpp"
#include "qwen3_moe_model.hpp"

namespace triax::qwen3_moe {
namespace {

using Json = nlohmann::json;
constexpr const char* kQwen3Moe = "Qwen3MoeForCausalLM";

// config.json's moe keys <-> model_config.moe_config's.
const std::vector<HfConfigKey> kMoeKeys = {{"num_experts", HfValue::Integer},
                                           {"num_experts_per_tok", HfValue::Integer, "top_k"},
                                           {"moe_intermediate_size", HfValue::Integer},
                                           {"norm_topk_prob", HfValue::Boolean},
                                           {"router_aux_loss_coef", HfValue::Number}};

// The moe_config of a config.json: transformers 5 writes the expert count as num_local_experts.
YAML::Node moe_config_from_hf(ConfigReader& hf) {
  YAML::Node moe(YAML::NodeType::Map);
  moe["layers"] = std::vector<int64_t>{-1};
  hf_keys_to_model_config(hf, kMoeKeys, moe);
  if (const std::optional<int64_t> local = hf.optional<int64_t>("num_local_experts")) {
    if (moe["num_experts"] && moe["num_experts"].as<int64_t>() != *local)
      hf.fail("num_local_experts", "disagrees with num_experts " + moe["num_experts"].as<std::string>());
    moe["num_experts"] = *local;
  }
  // transformers' Qwen3MoeConfig keeps the raw softmax gates unless norm_topk_prob says otherwise.
  if (!moe["norm_topk_prob"]) moe["norm_topk_prob"] = false;
  moe["enable_shared_expert"] = false;
  moe::moe_layers_from_hf(hf, moe, "qwen3");
  return moe;
}

YAML::Node config_from_hf(ConfigReader& hf) {
  require_hf_architecture(hf, {kQwen3Moe});
  require_hf_value(hf, "model_type", "qwen3_moe", "the architecture and model_type disagree");
  require_hf_value(hf, "attention_dropout", "0.0", "triax's qwen3_moe has no attention dropout");
  YAML::Node m(YAML::NodeType::Map);
  m["is_qwen3_config"] = true;
  m["rope_scaling"] = YAML::Node(YAML::NodeType::Null);
  hf_keys_to_model_config(hf, qwen3_decoder_hf_keys(), m);
  moe::read_plain_rope(hf, m, "qwen3_moe");
  if (const std::optional<int64_t> window = sliding_window_from_hf(hf, HfWindowKeys::Qwen3Moe))
    m["sliding_window_size"] = *window;
  m["moe_config"] = moe_config_from_hf(hf);
  // The reader's refusals name config.json and the key.
  ConfigReader check(m, "", "config.json");
  read_qwen3_moe_config(check);
  return m;
}

std::string config_to_hf(ConfigReader& model_config, const std::string& dtype) {
  const moe::MoeConfig c = read_qwen3_moe_config(model_config);
  if (c.moe.enable_shared_expert)
    model_config.fail("moe_config.enable_shared_expert",
                      "true cannot be exported: " + std::string(kQwen3Moe) + " has no shared expert");
  moe::refuse_unexported_positions(model_config, c, kQwen3Moe);
  Json json = {{"architectures", Json::array({kQwen3Moe})},
               {"model_type", "qwen3_moe"},
               {"attention_dropout", 0.0},
               {"torch_dtype", dtype},
               {"rope_scaling", nullptr},
               {"use_sliding_window", c.sliding_window_size.has_value()},
               {"sliding_window", c.sliding_window_size ? Json(*c.sliding_window_size) : Json(nullptr)}};
  model_config_keys_to_hf(model_config.resolved(), qwen3_decoder_hf_keys(), json);
  model_config_keys_to_hf(model_config.resolved()["moe_config"], kMoeKeys, json);
  moe::moe_layers_to_hf(c, json);
  return json.dump(2) + "\n";
}

std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  return moe::moe_tensor_rules(read_qwen3_moe_config(model_config), false);
}

}  // namespace

HfMapping Qwen3MoeModel::hf_mapping() { return {{kQwen3Moe}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::qwen3_moe
