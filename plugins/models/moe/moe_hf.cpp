#include "moe_hf.hpp"

#include <algorithm>

#include "moe_block_hf.hpp"
#include "triax/layers/swiglu_mlp.hpp"

namespace triax::moe {

void read_plain_rope(ConfigReader& hf, YAML::Node& m, const std::string& model_name) {
  if (std::optional<ConfigReader> parameters = hf.optional_section("rope_parameters")) {
    const std::string type = parameters->get<std::string>("rope_type", "default");
    if (type != "default")
      parameters->fail("rope_type", "'" + type + "' RoPE is not supported by triax's " + model_name);
    m["rope_theta"] = yaml_number(parameters->required<double>("rope_theta"));
  }
  if (std::optional<ConfigReader> scaling = hf.optional_section("rope_scaling")) {
    const std::string type = scaling->get<std::string>("rope_type", scaling->get<std::string>("type", "default"));
    if (type != "default") scaling->fail("rope_type", "'" + type + "' RoPE is not supported by triax's " + model_name);
  }
}

void refuse_unexported_positions(ConfigReader& model_config, const MoeConfig& c, const std::string& architecture) {
  if (c.rope_scaling) model_config.fail("rope_scaling", "scaled RoPE is not exported to " + architecture);
  if (c.rope_interleaved)
    model_config.fail("rope_interleaved",
                      "true (GPT-J rotary pairs) cannot be exported: " + architecture + " rotates halves of each head");
  if (c.no_rope_layer) model_config.fail("no_rope_layer", "layers without RoPE cannot be exported to " + architecture);
}

void moe_layers_from_hf(ConfigReader& hf, YAML::Node& moe, const std::string& dense_plugin) {
  const int64_t layers = hf.required<int64_t>("num_hidden_layers");
  const int64_t step = hf.get<int64_t>("decoder_sparse_step", 1);
  if (step < 1) hf.fail("decoder_sparse_step", "must be at least 1");
  const std::vector<int64_t> dense = hf.get<std::vector<int64_t>>("mlp_only_layers", {});
  std::vector<int64_t> sparse;
  for (int64_t i = 0; i < layers; ++i)
    if ((i + 1) % step == 0 && std::find(dense.begin(), dense.end(), i) == dense.end()) sparse.push_back(i);
  if (static_cast<int64_t>(sparse.size()) != layers) moe["layers"] = sparse;
  if (sparse.empty()) hf.fail("mlp_only_layers", "leaves no MoE layer: load it with the " + dense_plugin + " plugin");
}

void moe_layers_to_hf(const MoeConfig& c, nlohmann::json& json) {
  json["decoder_sparse_step"] = 1;
  nlohmann::json dense = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    if (!c.is_moe_layer(i)) dense.push_back(i);
  json["mlp_only_layers"] = dense;
}

std::vector<HfTensorRule> moe_tensor_rules(const MoeConfig& c, bool mixtral_names) {
  const int64_t h = c.hidden_size;
  std::vector<HfTensorRule> rules;
  rules.push_back(HfTensorRule::rename("model.embed_tokens.weight", {c.vocab_size, h}));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    c.add_hf_attention_rules(rules, layer + "self_attn.");
    const std::string mlp = layer + "mlp.";
    if (!c.is_moe_layer(i)) {
      rules.push_back(SwiGluMlp::hf_rule(mlp, h, c.intermediate_size));
      rules.push_back(HfTensorRule::rename(mlp + "down_proj.weight", {h, c.intermediate_size}));
    } else {
      // Mixtral's experts sit in block_sparse_moe with w1 (gate), w3 (up), w2 (down).
      const std::vector<HfTensorRule> block =
          mixtral_names ? moe_block_hf_rules(c.block_options(), mlp, layer + "block_sparse_moe.", MoeHfNames::mixtral())
                        : moe_block_hf_rules(c.block_options(), mlp, mlp);
      rules.insert(rules.end(), block.begin(), block.end());
    }
    rules.push_back(HfTensorRule::rename(layer + "input_layernorm.weight", {h}));
    rules.push_back(HfTensorRule::rename(layer + "post_attention_layernorm.weight", {h}));
  }
  c.add_hf_final_rules(rules);
  return rules;
}

}  // namespace triax::moe
