// The Hugging Face pieces a Llama-layout decoder shares with its variants (the qwen2 plugin's
// Qwen2ForCausalLM and SmolLM3ForCausalLM, the qwen3 plugin's Qwen3ForCausalLM): RoPE settings
// both ways, the sliding window of the Qwen configs and the tensor rules.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "llama_config.hpp"
#include "triax/hf_mapping.hpp"

namespace triax::llama {

// A config.json's rope_scaling section (transformers 4) or rope_parameters (5) -> rope_scaling (null: plain).
YAML::Node rope_scaling_from_hf(ConfigReader& rope);
// rope_parameters or rope_scaling (and rope_theta) of config.json into model_config `m`.
void rope_from_hf(ConfigReader& hf, YAML::Node& m);
// rope_scaling of `c` into config.json.
void rope_to_hf(const LlamaConfig& c, nlohmann::json& json);
// The sliding window as Qwen2's and Qwen3's config.json say it: use_sliding_window, sliding_window,
// and max_window_layers and layer_types saying that every layer is windowed (nanotron's meaning).
void qwen_window_to_hf(const LlamaConfig& c, nlohmann::json& json);
// Hugging Face rotates halves of each head: rope_interleaved: true is refused, naming `architecture`.
void refuse_hf_rotary_layout(ConfigReader& model_config, const LlamaConfig& c, const std::string& architecture);
// Every parameter (see llama_model.hpp) is a Hugging Face tensor of the same name, except the
// fused projections: qkv_proj (q_proj, k_proj, v_proj grouped by key/value head, weights and
// biases) and gate_up_proj (gate_proj and up_proj stacked).
std::vector<HfTensorRule> llama_tensor_rules(const LlamaConfig& c);

}  // namespace triax::llama
