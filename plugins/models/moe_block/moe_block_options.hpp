// What a mixture-of-experts block is made of, independent of any model's configuration keys: the
// model plugin that holds MoE layers fills these options from its own config (the moe plugin from
// moe_config, a hybrid from Hugging Face's Nemotron-H keys) and hands them to MoeBlock.
//
// Routing (TopKRouter): scores = softmax(logits) (Mixtral, Qwen-MoE) or sigmoid(logits)
// (DeepSeek-V3, Nemotron-H). Experts are chosen by scores + e_score_correction_bias (sigmoid
// only; the bias steers the choice, never the gate values), limited with n_group > 1 to the
// topk_group groups of num_experts / n_group experts whose two best choice scores sum highest. A
// chosen expert's gate is its score, divided by the sum of the token's top_k scores with
// norm_topk_prob, then times routed_scaling_factor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "token_dispatcher.hpp"

namespace triax::moe {

enum class RouterScore { Softmax, Sigmoid };
// SwiGlu: down(silu(gate(x)) * up(x)); SquaredRelu: down(relu(up(x))^2), no gate projection.
enum class ExpertActivation { SwiGlu, SquaredRelu };
// Gated: scaled per token by sigmoid(shared_expert_gate(x)) (Qwen2-MoE); Ungated: added as it is
// (DeepSeek-V3, Nemotron-H). The shared expert has the routed experts' activation.
enum class SharedExpert { None, Gated, Ungated };

struct MoeBlockOptions {
  int64_t hidden_size = 0;
  int64_t num_experts = 8;
  int64_t top_k = 2;
  int64_t expert_intermediate_size = 0;
  RouterScore score = RouterScore::Softmax;
  int64_t n_group = 1;     // expert groups for group-limited routing; 1: no limit
  int64_t topk_group = 1;  // the groups a token's experts may come from (n_group > 1)
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  ExpertActivation activation = ExpertActivation::SwiGlu;
  SharedExpert shared_expert = SharedExpert::None;
  int64_t shared_expert_intermediate_size = 0;
  TokenDispatcher::Kind dispatcher = TokenDispatcher::Kind::AllToAll;

  // Calls fail(field, why) for the first inconsistent field (named as the member above) and
  // returns after it; a plugin turns the field into its own key's path.
  void check(const std::function<void(const std::string& field, const std::string& why)>& fail) const;
  // Forward multiply-adds per token of the block: the router, the top_k experts a token passes
  // through and the shared expert (its gate too).
  double multiply_adds_per_token() const;
  // Every parameter of the block, all ep ranks' experts together.
  int64_t parameter_count() const;
};

// "softmax" | "sigmoid"; "swiglu" | "relu2" (Hugging Face's activation names); the Error of an
// unknown name lists the known ones.
RouterScore router_score_of(const std::string& name);
ExpertActivation expert_activation_of(const std::string& name);

}  // namespace triax::moe
