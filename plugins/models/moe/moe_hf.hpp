// The Hugging Face pieces the mixture-of-experts mappings share: the moe plugin's
// MixtralForCausalLM and Qwen2MoeForCausalLM (hf_mapping.cpp) and the qwen3_moe plugin's
// Qwen3MoeForCausalLM. Hugging Face stores each expert's projections as separate tensors; triax
// stacks them into one [E, out, in] tensor per projection (STACK rules).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "moe_config.hpp"
#include "triax/hf_mapping.hpp"

namespace triax::moe {

// Plain RoPE only: rope_parameters (transformers 5) or rope_scaling (4) must say "default";
// rope_parameters' rope_theta into model_config `m`. `model_name` names triax's model in refusals.
void read_plain_rope(ConfigReader& hf, YAML::Node& m, const std::string& model_name);
// What the MoE exports cannot write: scaled RoPE, GPT-J rotary pairs, layers without RoPE; each
// refused naming its key and `architecture`.
void refuse_unexported_positions(ConfigReader& model_config, const MoeConfig& c, const std::string& architecture);
// Qwen2-MoE's and Qwen3-MoE's decoder_sparse_step and mlp_only_layers -> moe_config.layers in `moe`
// (left as given when every layer is one); none is refused, naming `dense_plugin` for such a model.
void moe_layers_from_hf(ConfigReader& hf, YAML::Node& moe, const std::string& dense_plugin);
// moe_config.layers -> decoder_sparse_step 1 and mlp_only_layers.
void moe_layers_to_hf(const MoeConfig& c, nlohmann::json& json);
// Every rule of the model, in Hugging Face's order: the experts under Mixtral's names
// (block_sparse_moe.experts.{j}.w1/w3/w2) or Qwen2-MoE's (mlp.experts.{j}.gate/up/down_proj, with
// the shared expert and its gate when enabled), the attention as DecoderConfig describes it.
std::vector<HfTensorRule> moe_tensor_rules(const MoeConfig& c, bool mixtral_names);

}  // namespace triax::moe
