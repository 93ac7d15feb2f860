// The MoE router: a linear map to one logit per expert, scores in fp32 (softmax or sigmoid,
// moe_block_options.hpp), the top-k experts of each token and their gates, and the statistics of
// one forward (balance loss, z-loss, load).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "moe_block_options.hpp"
#include "triax/layers/tensor_parallel.hpp"
#include "triax/model.hpp"
#include "triax/parameter.hpp"

namespace triax::moe {

struct Routing {
  at::Tensor logits;   // [tokens, experts] fp32
  // [tokens, experts] fp32, each row summing to 1: the softmax of logits, or the sigmoid scores
  // divided by their sum (what the balance loss reads, as Megatron-Core's sigmoid router)
  at::Tensor probs;
  at::Tensor experts;  // [tokens, top_k] int64, highest choice score first
  // [tokens, top_k] fp32: the experts' scores, renormalised to sum 1 with norm_topk_prob, times
  // routed_scaling_factor
  at::Tensor gates;
};

// One forward's router statistics over the whole micro-batch (all tp sequence shards). The two
// losses are unweighted and differentiable; the loads are detached.
struct RouterStatistics {
  // Switch/Mixtral load balancing: E * sum_e f_e * P_e, f_e the share of the tokens' top_k
  // assignments that went to expert e, P_e the mean router probability of e; 1 when uniform.
  at::Tensor balance;
  at::Tensor z_loss;  // mean over tokens of logsumexp(logits)^2 (ST-MoE)
  // Each expert's assignments relative to the uniform share (N * top_k / E): min, max, and the
  // coefficient of variation (standard deviation / mean) over experts.
  at::Tensor load_min, load_max, load_cv;
};

// Sigmoid routing's bias [experts], added to the scores that choose the experts (Hugging Face's
// gate.e_score_correction_bias; triax's gate.e_score_correction.bias, so that every initialisation
// zeroes it as a bias). A parameter, so that checkpoints keep it, without weight decay; no
// gradient reaches it (the choice is not differentiable): training leaves it as loaded.
class ScoreCorrection : public SpecifiedModule {
 public:
  ScoreCorrection(int64_t num_experts, const ModelContext& context);
  at::Tensor bias;  // [experts], replicated over tp
};

class TopKRouter : public SpecifiedModule {
 public:
  TopKRouter(const MoeBlockOptions& options, const ModelContext& context);

  // tokens: [N, hidden], this rank's tokens (a sequence shard in REDUCE_SCATTER mode).
  Routing route(const at::Tensor& tokens);
  // Collective over tp in REDUCE_SCATTER mode (the shards' counts and sums are added), so every
  // tp rank holds the whole micro-batch's values; each rank's losses carry the gradient of its
  // own tokens only, so that summing the replicated router's gradient over tp counts each once.
  RouterStatistics statistics(const Routing& routing) const;

  at::Tensor weight;  // [experts, hidden], replicated over tp
  std::shared_ptr<ScoreCorrection> e_score_correction;  // sigmoid routing only

 private:
  // The choice scores with every expert outside the token's topk_group best groups at -inf.
  at::Tensor limit_to_best_groups(const at::Tensor& choice) const;

  MoeBlockOptions options_;
  TensorParallel tp_;
};

}  // namespace triax::moe
