// The MoE model's Hugging Face mapping: MixtralForCausalLM (no shared expert) and
// Qwen2MoeForCausalLM (a shared expert with a sigmoid gate). Both store each expert's projections
// as separate tensors (block_sparse_moe.experts.{j}.w1/w3/w2 in Mixtral, mlp.experts.{j}.
// gate/up/down_proj in Qwen2-MoE, the layout transformers writes); triax stacks them into one
// [E, out, in] tensor per projection (STACK rules). Which architecture a model config exports
// to follows from moe_config.enable_shared_expert.
#include <nlohmann/json.hpp>

#include "moe_model.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/swiglu_mlp.hpp"

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

// Plain RoPE only: rope_parameters (transformers 5) or rope_scaling (4) must say "default".
void read_rope(ConfigReader& hf, YAML::Node& m) {
  if (std::optional<ConfigReader> parameters = hf.optional_section("rope_parameters")) {
    const std::string type = parameters->get<std::string>("rope_type", "default");
    if (type != "default") parameters->fail("rope_type", "'" + type + "' RoPE is not supported by triax's moe");
    m["rope_theta"] = yaml_number(parameters->required<double>("rope_theta"));
  }
  if (std::optional<ConfigReader> scaling = hf.optional_section("rope_scaling")) {
    const std::string type = scaling->get<std::string>("rope_type", scaling->get<std::string>("type", "default"));
    if (type != "default") scaling->fail("rope_type", "'" + type + "' RoPE is not supported by triax's moe");
  }
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
  read_rope(hf, m);
  if (const std::optional<int64_t> window = sliding_window_from_hf(hf, mixtral ? HfWindowKeys::Mistral : HfWindowKeys::Qwen2Moe)) m["sliding_window_size"] = *window;
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
    const int64_t layers = hf.required<int64_t>("num_hidden_layers");
    const int64_t step = hf.get<int64_t>("decoder_sparse_step", 1);
    if (step < 1) hf.fail("decoder_sparse_step", "must be at least 1");
    const std::vector<int64_t> dense = hf.get<std::vector<int64_t>>("mlp_only_layers", {});
    std::vector<int64_t> sparse;
    for (int64_t i = 0; i < layers; ++i)
      if ((i + 1) % step == 0 && std::find(dense.begin(), dense.end(), i) == dense.end()) sparse.push_back(i);
    if (static_cast<int64_t>(sparse.size()) != layers) moe["layers"] = sparse;
    if (sparse.empty()) hf.fail("mlp_only_layers", "leaves no MoE layer: load it with the llama plugin");
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
  if (c.rope_scaling) refuse("rope_scaling", "scaled RoPE is not exported for MoE models");
  if (c.rope_interleaved) refuse("rope_interleaved", "true (GPT-J rotary pairs) cannot be exported: Hugging Face rotates halves");
  if (c.no_rope_layer) refuse("no_rope_layer", "layers without RoPE cannot be exported to Mixtral or Qwen2-MoE");
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
    json["decoder_sparse_step"] = 1;
    json["qkv_bias"] = c.attention_bias;
    // nanotron windows every layer: layer_types says so to every transformers version that reads it.
    json["use_sliding_window"] = c.sliding_window_size.has_value();
    json["sliding_window"] = c.sliding_window_size ? Json(*c.sliding_window_size) : Json(nullptr);
    json["max_window_layers"] = c.num_hidden_layers;
    if (c.sliding_window_size)
      json["layer_types"] = Json(std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers), "sliding_attention"));
    Json dense = Json::array();
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      if (!c.is_moe_layer(i)) dense.push_back(i);
    json["mlp_only_layers"] = dense;
  }
  return json.dump(2) + "\n";
}

std::vector<HfTensorRule> tensor_map(ConfigReader& model_config) {
  const MoeConfig c = MoeConfig::read(model_config);
  const bool mixtral = !c.moe.enable_shared_expert;
  const int64_t h = c.hidden_size, q = c.q_features();
  const int64_t e = c.moe.num_experts, f = c.moe.moe_intermediate_size;
  const QkvLayout qkv{c.num_attention_heads, c.num_key_value_heads, c.head_dim()};
  std::vector<HfTensorRule> rules;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, const std::string& hf_name = "") {
    rules.push_back(HfTensorRule::rename(name, std::move(shape), hf_name));
  };
  // One HF tensor per expert, stacked along dim 0.
  auto stack = [&](const std::string& name, std::vector<int64_t> shape, const std::string& prefix,
                   const std::string& suffix) {
    std::vector<std::string> names;
    for (int64_t j = 0; j < e; ++j) names.push_back(prefix + std::to_string(j) + suffix);
    rules.push_back(HfTensorRule::stack(name, std::move(shape), 0, std::move(names)));
  };
  add("model.embed_tokens.weight", {c.vocab_size, h});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    rules.push_back(qkv.hf_rule(layer + "self_attn.", "weight", {h}));
    if (c.attention_bias) rules.push_back(qkv.hf_rule(layer + "self_attn.", "bias", {}));
    add(layer + "self_attn.o_proj.weight", {h, q});
    const std::string mlp = layer + "mlp.";
    if (!c.is_moe_layer(i)) {
      rules.push_back(SwiGluMlp::hf_rule(mlp, h, c.intermediate_size));
      add(mlp + "down_proj.weight", {h, c.intermediate_size});
    } else if (mixtral) {
      const std::string hf = layer + "block_sparse_moe.";
      add(mlp + "gate.weight", {e, h}, hf + "gate.weight");
      stack(mlp + "experts.gate_proj", {e, f, h}, hf + "experts.", ".w1.weight");
      stack(mlp + "experts.up_proj", {e, f, h}, hf + "experts.", ".w3.weight");
      stack(mlp + "experts.down_proj", {e, h, f}, hf + "experts.", ".w2.weight");
    } else {
      const int64_t s = c.moe.shared_expert_intermediate_size;
      add(mlp + "gate.weight", {e, h});
      stack(mlp + "experts.gate_proj", {e, f, h}, mlp + "experts.", ".gate_proj.weight");
      stack(mlp + "experts.up_proj", {e, f, h}, mlp + "experts.", ".up_proj.weight");
      stack(mlp + "experts.down_proj", {e, h, f}, mlp + "experts.", ".down_proj.weight");
      rules.push_back(SwiGluMlp::hf_rule(mlp + "shared_expert.", h, s));
      add(mlp + "shared_expert.down_proj.weight", {h, s});
      add(mlp + "shared_expert_gate.weight", {1, h});
    }
    add(layer + "input_layernorm.weight", {h});
    add(layer + "post_attention_layernorm.weight", {h});
  }
  c.add_hf_final_rules(rules);
  return rules;
}

}  // namespace

HfMapping MoeModel::hf_mapping() { return {{kMixtral, kQwen2Moe}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace triax::moe
