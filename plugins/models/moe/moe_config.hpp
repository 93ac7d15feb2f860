// model.model_config of a mixture-of-experts decoder, read strictly.
//
// The keys are those of nanotron's Qwen2Config (is_qwen2_config, the Llama-style attention keys;
// Qwen3's variant: MoeFamily)
// with its `moe_config` section (num_experts, top_k, moe_intermediate_size,
// shared_expert_intermediate_size, enable_shared_expert, router_aux_loss_coef, layers,
// token_dispatcher_type) plus triax's router_z_loss_coef and norm_topk_prob. Values naming
// something this plugin does not implement are refused with the key's path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moe_block_options.hpp"
#include "triax/config_reader.hpp"
#include "triax/decoder_config.hpp"

namespace triax::moe {

// model_config.moe_config.
struct MoeSettings {
  int64_t num_experts = 8;
  int64_t top_k = 2;
  std::vector<int64_t> layers = {-1};  // the MoE layers; [-1]: every layer
  int64_t moe_intermediate_size = 0;   // 0 in the YAML (or absent): intermediate_size
  int64_t shared_expert_intermediate_size = 0;
  bool enable_shared_expert = false;
  bool norm_topk_prob = true;  // renormalise the top-k gates to sum to 1 (Mixtral); false: raw softmax (Qwen2-MoE)
  double router_aux_loss_coef = 0.01;
  double router_z_loss_coef = 0.0;
  std::string token_dispatcher_type = "alltoall";  // alltoall | allgather
};

// Which nanotron-style config a MoE decoder reads: Qwen2's (the moe plugin: is_qwen2_config,
// attention_bias on q, k and v) or Qwen3's (the qwen3_moe plugin: is_qwen3_config, qk-norm, the
// head_dim key, attention_bias on all four projections as in Hugging Face's Qwen3-MoE).
struct MoeFamily {
  const char* marker = "is_qwen2_config";
  const char* plugin = "moe";
  bool qwen3_attention = false;

  static MoeFamily qwen3() { return {"is_qwen3_config", "qwen3_moe", true}; }
};

// intermediate_size is the dense layers' (those not in moe_config.layers).
struct MoeConfig : DecoderConfig {
  MoeSettings moe;

  bool is_moe_layer(int64_t layer) const;
  // The MoE block of this config: softmax routing, SwiGLU experts, the shared expert gated.
  MoeBlockOptions block_options() const;
  int64_t moe_layer_count() const;

  // Reads and validates every key of `reader`, then calls reader.finish(); defaults are recorded
  // into reader.resolved().
  static MoeConfig read(ConfigReader& reader, const MoeFamily& family = {});
};

// Forward FLOPs per token of each pipeline block, counting the experts a token is routed to
// (top_k of them, plus the shared expert): the active parameters.
std::vector<double> moe_block_costs(const MoeConfig& config, int64_t sequence_length);

}  // namespace triax::moe
