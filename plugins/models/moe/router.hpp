// The MoE router: a linear map to one score per expert, a softmax in fp32, the top-k experts of
// each token and their gates, and the statistics of one forward (balance loss, z-loss, load).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "triax/layers/tensor_parallel.hpp"
#include "triax/model.hpp"
#include "triax/parameter.hpp"

namespace triax::moe {

struct Routing {
  at::Tensor logits;   // [tokens, experts] fp32
  at::Tensor probs;    // [tokens, experts] fp32, softmax of logits
  at::Tensor experts;  // [tokens, top_k] int64, highest probability first
  at::Tensor gates;    // [tokens, top_k] fp32: the probabilities, renormalised to sum 1 with norm_topk_prob
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

class TopKRouter : public SpecifiedModule {
 public:
  TopKRouter(int64_t hidden_size, int64_t num_experts, int64_t top_k, bool norm_topk_prob, const ModelContext& context);

  // tokens: [N, hidden], this rank's tokens (a sequence shard in REDUCE_SCATTER mode).
  Routing route(const at::Tensor& tokens);
  // Collective over tp in REDUCE_SCATTER mode (the shards' counts and sums are added), so every
  // tp rank holds the whole micro-batch's values; each rank's losses carry the gradient of its
  // own tokens only, so that summing the replicated router's gradient over tp counts each once.
  RouterStatistics statistics(const Routing& routing) const;

  at::Tensor weight;  // [experts, hidden], replicated over tp

 private:
  int64_t num_experts_, top_k_;
  bool norm_topk_prob_;
  TensorParallel tp_;
};

}  // namespace triax::moe
