// The mixture-of-experts feed-forward block (Hugging Face MixtralSparseMoeBlock,
// Qwen2MoeSparseMoeBlock, NemotronHMoE): the router picks top_k experts per token
// (moe_block_options.hpp), the token dispatcher brings each assignment to the ep rank holding its
// expert, the experts (SwiGLU or squared ReLU) transform it, and the results come back weighted
// by their gates; with a shared expert, a dense block of the experts' kind is added, gated per
// token by sigmoid(shared_expert_gate(x)) or as it is.
//
// Parameters (Qwen2-MoE's names): gate.weight [E, hidden] (the router), gate.e_score_correction.bias
// [E] (sigmoid routing), experts.{gate,up}_proj [E, F, hidden] (no gate_proj for squared ReLU) and
// experts.down_proj [E, hidden, F] (this ep rank's E / ep experts), shared_expert.gate_up_proj.weight
// (SwiGLU) or shared_expert.up_proj.weight (squared ReLU), shared_expert.down_proj.weight,
// shared_expert_gate.weight [1, hidden] (gated).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>

#include "grouped_experts.hpp"
#include "moe_block_options.hpp"
#include "router.hpp"
#include "token_dispatcher.hpp"
#include "triax/layers/side_outputs.hpp"
#include "triax/layers/unary_module.hpp"

namespace triax::moe {

class SharedExpertGate : public SpecifiedModule {
 public:
  SharedExpertGate(int64_t hidden_size, const ModelContext& context);
  at::Tensor forward(const at::Tensor& x);  // [..., hidden] -> [..., 1], the sigmoid gate
  at::Tensor weight;                        // [1, hidden], replicated over tp

 private:
  TensorParallel tp_;
};

class MoeBlock : public torch::nn::Module {
 public:
  // options.check() should have passed (the plugin reports its own keys).
  MoeBlock(const MoeBlockOptions& options, const ModelContext& context);

  // x: [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode) -> the same shape.
  // In training mode, where they can reach a backward (side_outputs.hpp), records the router
  // statistics of this forward. With ModelContext::recompute_moe_layers, in training, the block
  // keeps only x and runs again in backward (triax/layers/recompute.hpp).
  at::Tensor forward(const at::Tensor& x);
  // Whether forward serves `tokens` tokens by expert (GroupedExperts::forward_by_expert, no host
  // synchronisation) instead of through the dispatcher: at inference (grad mode off), on one ep
  // rank, experts not in fp8, and at most as many (token, slot) rows as experts: a decoding step.
  // TRIAX_MOE_DECODE_BY_EXPERT=0 (read once) keeps the dispatcher.
  bool serves_by_expert(int64_t tokens) const;
  // The statistics of the last recorded forward, handed over once.
  std::optional<RouterStatistics> take_statistics();

  std::shared_ptr<TopKRouter> gate;
  std::shared_ptr<GroupedExperts> experts;
  UnaryModule shared_expert;                             // SwiGluMlp or UngatedMlp (relu²); null module without one
  std::shared_ptr<SharedExpertGate> shared_expert_gate;  // SharedExpert::Gated

 private:
  at::Tensor route_and_combine(const at::Tensor& x);

  int64_t top_k_;
  bool recomputed_;
  bool one_ep_rank_;
  TokenDispatcher dispatcher_;
  SideOutput statistics_;  // RouterStatistics' five tensors, in their order
};

}  // namespace triax::moe
