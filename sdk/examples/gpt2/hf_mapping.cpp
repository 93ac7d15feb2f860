// The GPT-2 model's Hugging Face mapping (GPT2LMHeadModel). The parameters have Hugging Face's
// names and Conv1D layouts, so the tensor map is a table of renames; only c_attn, q/k/v kept
// apart here ([n_embd, 3, n_embd]) so that a tp rank's heads are one slice, is flattened there.
#include <nlohmann/json.hpp>

#include "gpt2_model.hpp"

namespace gpt2 {
namespace {

using triax::HfConfigKey;
using triax::HfTensorRule;
using triax::HfValue;
constexpr const char* kArchitecture = "GPT2LMHeadModel";

const std::vector<HfConfigKey> kSharedKeys = {
    {"vocab_size", HfValue::Integer},   {"n_positions", HfValue::Integer},         {"n_embd", HfValue::Integer},
    {"n_layer", HfValue::Integer},      {"n_head", HfValue::Integer},              {"n_inner", HfValue::Integer},
    {"bos_token_id", HfValue::TokenId}, {"layer_norm_epsilon", HfValue::Number},   {"eos_token_id", HfValue::TokenId},
    {"initializer_range", HfValue::Number}, {"tie_word_embeddings", HfValue::Boolean},
    {"activation_function", HfValue::String}};

YAML::Node config_from_hf(triax::ConfigReader& hf) {
  triax::require_hf_architecture(hf, {kArchitecture});
  triax::require_hf_value(hf, "model_type", "gpt2", "the gpt2 plugin reads GPT-2 models");
  triax::require_hf_value(hf, "scale_attn_weights", "true", "attention scores are scaled by 1/sqrt(head_dim)");
  triax::require_hf_value(hf, "scale_attn_by_inverse_layer_idx", "false", "no per-layer attention scaling");
  YAML::Node m(YAML::NodeType::Map);
  triax::hf_keys_to_model_config(hf, kSharedKeys, m);
  triax::ConfigReader check(m, "", "config.json");  // refusals name config.json and the key
  Gpt2Config::read(check);
  return m;  // the *_pdrop keys are training-time dropout, which triax does not apply
}

std::string config_to_hf(triax::ConfigReader& model_config, const std::string& dtype) {
  Gpt2Config::read(model_config);
  nlohmann::json json = {{"architectures", {kArchitecture}}, {"model_type", "gpt2"},  {"torch_dtype", dtype},
                         {"attn_pdrop", 0.0},                {"embd_pdrop", 0.0},     {"resid_pdrop", 0.0},
                         {"scale_attn_weights", true},       {"use_cache", true}};
  triax::model_config_keys_to_hf(model_config.resolved(), kSharedKeys, json);
  return json.dump(2) + "\n";
}

std::vector<HfTensorRule> tensor_map(triax::ConfigReader& model_config) {
  const Gpt2Config c = Gpt2Config::read(model_config);
  const int64_t h = c.n_embd, ffn = c.n_inner;
  std::vector<HfTensorRule> rules;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    rules.push_back(HfTensorRule::rename(name, std::move(shape)));
  };
  auto flatten = [&](const std::string& name, std::vector<int64_t> shape, int32_t dim) {
    rules.push_back(HfTensorRule::rename(name, std::move(shape)));
    rules.back().kind = TRIAX_HF_FLATTEN;  // the HF tensor: dims dim and dim + 1 merged
    rules.back().dim = dim;
  };
  auto with_bias = [&](const std::string& name, std::vector<int64_t> weight, int64_t bias) {
    add(name + ".weight", std::move(weight));
    add(name + ".bias", {bias});
  };
  add("transformer.wte.weight", {c.vocab_size, h});
  add("transformer.wpe.weight", {c.n_positions, h});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string block = "transformer.h." + std::to_string(i) + ".";
    with_bias(block + "ln_1", {h}, h);
    flatten(block + "attn.c_attn.weight", {h, 3, h}, 1);  // [h, 3h] there
    flatten(block + "attn.c_attn.bias", {3, h}, 0);       // [3h] there
    with_bias(block + "attn.c_proj", {h, h}, h);
    with_bias(block + "ln_2", {h}, h);
    with_bias(block + "mlp.c_fc", {h, ffn}, ffn);
    with_bias(block + "mlp.c_proj", {ffn, h}, h);
  }
  with_bias("transformer.ln_f", {h}, h);
  // The head, and the causal mask that older checkpoints carry as buffers, skipped.
  triax::add_hf_head_rules(rules, "transformer.wte.weight", {c.vocab_size, h}, c.tie_word_embeddings,
                           {"transformer.h.*.attn.bias", "transformer.h.*.attn.masked_bias"});
  return rules;
}

}  // namespace

triax::HfMapping Gpt2Model::hf_mapping() { return {{kArchitecture}, config_from_hf, config_to_hf, tensor_map}; }

}  // namespace gpt2
