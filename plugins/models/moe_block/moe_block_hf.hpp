// The Hugging Face tensor rules of one MoE block. Hugging Face checkpoints store each expert's
// projections as separate tensors (experts.{j}.up_proj.weight, ...); triax stacks them into one
// [E, out, in] tensor per projection (STACK rules). The names around the experts differ by
// architecture; MoeHfNames says which (Qwen2-MoE's by default).
#pragma once

#include <string>
#include <vector>

#include "moe_block_options.hpp"
#include "triax/hf_mapping.hpp"

namespace triax::moe {

struct MoeHfNames {
  std::string expert_gate = ".gate_proj.weight";  // after hf_prefix + "experts." + j
  std::string expert_up = ".up_proj.weight";
  std::string expert_down = ".down_proj.weight";
  std::string shared_expert = "shared_expert.";  // Nemotron-H and DeepSeek-V3: "shared_experts."

  static MoeHfNames mixtral() { return {".w1.weight", ".w3.weight", ".w2.weight", "shared_expert."}; }
  static MoeHfNames nemotron_h() { return {".gate_proj.weight", ".up_proj.weight", ".down_proj.weight", "shared_experts."}; }
};

// The rules between the block's parameters under `prefix` (moe_block.hpp's names) and the
// Hugging Face tensors under `hf_prefix`, in Hugging Face's order: gate.weight,
// gate.e_score_correction_bias (sigmoid routing), the experts' gate (SwiGLU), up and down
// projections, the shared expert's projections and shared_expert_gate.weight (gated).
std::vector<HfTensorRule> moe_block_hf_rules(const MoeBlockOptions& options, const std::string& prefix,
                                             const std::string& hf_prefix, const MoeHfNames& names = {});

}  // namespace triax::moe
