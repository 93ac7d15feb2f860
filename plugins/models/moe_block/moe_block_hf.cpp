#include "moe_block_hf.hpp"

#include "triax/layers/swiglu_mlp.hpp"

namespace triax::moe {

std::vector<HfTensorRule> moe_block_hf_rules(const MoeBlockOptions& o, const std::string& prefix,
                                             const std::string& hf_prefix, const MoeHfNames& names) {
  const int64_t h = o.hidden_size, e = o.num_experts, f = o.expert_intermediate_size;
  std::vector<HfTensorRule> rules;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, const std::string& hf_name) {
    rules.push_back(HfTensorRule::rename(prefix + name, std::move(shape), hf_prefix + hf_name));
  };
  // One HF tensor per expert, stacked along dim 0.
  auto stack = [&](const std::string& name, std::vector<int64_t> shape, const std::string& suffix) {
    std::vector<std::string> hf_names;
    for (int64_t j = 0; j < e; ++j) hf_names.push_back(hf_prefix + "experts." + std::to_string(j) + suffix);
    rules.push_back(HfTensorRule::stack(prefix + name, std::move(shape), 0, std::move(hf_names)));
  };
  add("gate.weight", {e, h}, "gate.weight");
  if (o.score == RouterScore::Sigmoid) add("gate.e_score_correction.bias", {e}, "gate.e_score_correction_bias");
  if (o.activation == ExpertActivation::SwiGlu) stack("experts.gate_proj", {e, f, h}, names.expert_gate);
  stack("experts.up_proj", {e, f, h}, names.expert_up);
  stack("experts.down_proj", {e, h, f}, names.expert_down);
  if (o.shared_expert == SharedExpert::None) return rules;
  const int64_t s = o.shared_expert_intermediate_size;
  const std::string shared = prefix + "shared_expert.", hf_shared = hf_prefix + names.shared_expert;
  if (o.activation == ExpertActivation::SwiGlu) {
    // triax's fused gate_up_proj against Hugging Face's separate gate and up projections.
    HfTensorRule gate_up = SwiGluMlp::hf_rule(shared, h, s);
    gate_up.hf_names = {hf_shared + "gate_proj.weight", hf_shared + "up_proj.weight"};
    rules.push_back(std::move(gate_up));
  } else {
    rules.push_back(HfTensorRule::rename(shared + "up_proj.weight", {s, h}, hf_shared + "up_proj.weight"));
  }
  rules.push_back(HfTensorRule::rename(shared + "down_proj.weight", {h, s}, hf_shared + "down_proj.weight"));
  if (o.shared_expert == SharedExpert::Gated) add("shared_expert_gate.weight", {1, h}, "shared_expert_gate.weight");
  return rules;
}

}  // namespace triax::moe
