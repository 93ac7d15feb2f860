// The MoE model's Hugging Face mapping: MixtralForCausalLM (no shared expert) and
// Qwen2MoeForCausalLM (a shared expert with a sigmoid gate). Both store each expert's projections
// as separate tensors (block_sparse_moe.experts.{j}.w1/w3/w2 in Mixtral, mlp.experts.{j}.
// gate/up/down_proj in Qwen2-MoE, the layout transformers writes); triax stacks them into one
// [E, out, in] tensor per projection (STACK rules). Which architecture a model config exports
// to follows from moe_config.enable_shared_expert.
#include <nlohmann/json.hpp>

#include "moe_hf.hpp"
#include "moe_model.hpp"

namespace triax::moe {
namespace {

using Json = nlohmann::json;
constexpr const char* kMixtral = "MixtralForCausalLM";
constexpr const char* kQwen2Moe = "Qwen2MoeForCausalLM";

// config.json's moe keys <-> model_config.moe_config's.
const std::vector<HfConfigKey> kMixtralMoeKeys = {{"num_local_experts", HfValue::Integer, "num_experts"},
                                                  {"num_experts_per_tok", HfValue::Integer, "top_k"},
                                                  {"router_aux_loss_coef", HfValue::Number}};
const std::vector<HfConfigKey> kQwen2MoeKeys = {{"num_experts", HfValue::Integer},
                                                {"num_experts_per_tok", HfValue::Integer, "top_k"},
                                                {"moe_intermediate_size", HfValue::Integer},
                                                {"shared_expert_intermediate_size", HfValue::Integer},
                                                {"norm_topk_prob", HfValue::Boolean},
                                                {"router_aux_loss_coef", HfValue::Number}};

bool is_mixtral(ConfigReader& hf) {
  const std::vector<std::string> found = hf.get<std::vector<std::string>>("architectures", {});
  return std::find(found.begin(), found.end(), kMixtral) != found.end();
}

YAML::Node config_from_hf(ConfigReader& hf) {
  require_hf_architecture(hf, {kMixtral, kQwen2Moe});
  const bool mixtral = is_mixtral(hf);
  require_hf_value(hf, "model_type", mixtral ? "mixtral" : "qwen2_moe", "the architecture and model_type disagree");
  require_hf_value(hf, "attention_dropout", "0.0", "triax's moe has no attention dropout");
  YAML::Node m(YAML::NodeType::Map);
  m["is_qwen2_config"] = true;
  m["rope_scaling"] = YAML::Node(YAML::NodeType::Null);
  hf_keys_to_model_config(hf, decoder_hf_keys(), m);
  read_plain_rope(hf, m, "moe");
  if (const std::optional<int64_t> window =
          sliding_window_from_hf(hf, mixtral ? HfWindowKeys::Mistral : HfWindowKeys::Qwen2Moe))
    m["sliding_window_size"] = *window;
  YAML::Node moe(YAML::NodeType::Map);
  moe["layers"] = std::vector<int64_t>{-1};
  if (mixtral) {
    require_hf_value(hf, "router_jitter_noise", "0.0", "router jitter is not implemented");
    hf_keys_to_model_config(hf, kMixtralMoeKeys, moe);
    moe["moe_intermediate_size"] = m["intermediate_size"];
    moe["enable_shared_expert"] = false;
    moe["norm_topk_prob"] = true;  // Mixtral always renormalises the top-k gates
  } else {
    m["attention_bias"] = hf.get<bool>("qkv_bias", false);  // biases on q, k and v (MoeConfig's meaning)
    hf_keys_to_model_config(hf, kQwen2MoeKeys, moe);
    moe["enable_shared_expert"] = true;
    moe_layers_from_hf(hf, moe, "llama");
  }
  m["moe_config"] = moe;
  // The reader's refusals name config.json and the key.
  ConfigReader check(m, "", "config.json");
  MoeConfig::read(check).check_hf_head_dim(hf, "moe");
  return m;
}

std::string config_to_hf(ConfigReader& model_config, const std::string& dtype) {
  const MoeConfig c = MoeConfig::read(model_config);
  const bool mixtral = !c.moe.enable_shared_expert;
  auto refuse = [&](const std::string& key, const std::string& why) { model_config.fail(key, why); };
  if (c.attention_bias && mixtral) refuse("attention_bias", "true cannot be exported to Mixtral, which has no attention biases");
  refuse_unexported_positions(model_config, c, mixtral ? kMixtral : kQwen2Moe);
  Json json = {{"architectures", Json::array({mixtral ? kMixtral : kQwen2Moe})},
               {"model_type", mixtral ? "mixtral" : "qwen2_moe"},
               {"attention_dropout", 0.0},
               {"head_dim", c.head_dim()},
               {"torch_dtype", dtype},
               {"rope_scaling", nullptr}};
  model_config_keys_to_hf(model_config.resolved(), decoder_hf_keys(), json);
  const YAML::Node moe = model_config.resolved()["moe_config"];
  if (mixtral) {
    const bool every_layer = c.moe_layer_count() == c.num_hidden_layers;
    if (!every_layer) refuse("moe_config.layers", "Mixtral has experts on every layer; export needs layers: [-1]");
    if (!c.moe.norm_topk_prob) refuse("moe_config.norm_topk_prob", "Mixtral renormalises the top-k gates: needs true");
    if (c.moe.moe_intermediate_size != c.intermediate_size)
      refuse("moe_config.moe_intermediate_size", "Mixtral's experts have intermediate_size (" +
                                                     std::to_string(c.intermediate_size) + ") features");
    model_config_keys_to_hf(moe, kMixtralMoeKeys, json);
    json["router_jitter_noise"] = 0.0;
    json["sliding_window"] = c.sliding_window_size ? Json(*c.sliding_window_size) : Json(nullptr);
  } else {
    model_config_keys_to_hf(moe, kQwen2MoeKeys, json);
    moe_layers_to_hf(c, json);
    json["qkv_bias"] = c.attention_bias;
    // nanotron windows every layer: layer_types says so to every transformers version that reads it.
    json["use_sliding_window"] = c.sliding_window_size.has_value();
    json["sliding_window"] = c.sliding_window_size ? Json(*c.sliding_window_size) : Json(nullptr);
    json["max_window_layers"] = c.num_hidden_layers;
    if (c.sliding_window_size)
      json["layer_types"] =
          Json(std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers), "sliding_attention"));
  }
  return json.dump(2) + "\n";
}

std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  const MoeConfig c = MoeConfig::read(model_config);
  return moe_tensor_rules(c, !c.moe.enable_shared_expert);
}

}  // namespace

HfMapping MoeModel::hf_mapping() { return {{kMixtral, kQwen2Moe}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::moe
