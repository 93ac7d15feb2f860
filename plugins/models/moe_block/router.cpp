#include "router.hpp"

#include <ATen/ATen.h>

#include <limits>

#include "triax/layers/context_parallel.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"

namespace triax::moe {

ScoreCorrection::ScoreCorrection(int64_t num_experts, const ModelContext& context) {
  at::Tensor value = at::zeros({num_experts}, at::TensorOptions().device(context.device).dtype(context.dtype));
  bias = register_parameter_with_spec(
      "bias", value, ParameterSpec::replicated(value, TRIAX_PARAM_NO_WEIGHT_DECAY, ParameterRole::Vector));
}

TopKRouter::TopKRouter(const MoeBlockOptions& options, const ModelContext& context)
    : options_(options), tp_(TensorParallel::of(context)) {
  at::Tensor value = at::empty({options.num_experts, options.hidden_size},
                               at::TensorOptions().device(context.device).dtype(context.dtype));
  weight = register_parameter_with_spec("weight", value, ParameterSpec::replicated(value, 0, ParameterRole::Matrix));
  if (options.score == RouterScore::Sigmoid)
    e_score_correction =
        register_module("e_score_correction", std::make_shared<ScoreCorrection>(options.num_experts, context));
}

Routing TopKRouter::route(const at::Tensor& tokens) {
  Routing r;
  const at::Tensor w = replicated_on_sequence_shard(weight, tp_);
  // The scores in fp32 whatever the model's dtype: top-k on bf16 probabilities ties too often.
  r.logits = at::linear(tokens.to(at::kFloat), w.to(at::kFloat));
  at::Tensor scores, choice;
  if (options_.score == RouterScore::Softmax) {
    scores = r.probs = choice = at::softmax(r.logits, -1);
  } else {
    scores = at::sigmoid(r.logits);
    r.probs = scores / scores.sum(-1, true);
    choice = scores.detach() + e_score_correction->bias.detach().to(at::kFloat);
  }
  if (options_.n_group > 1) choice = limit_to_best_groups(choice.detach());
  if (options_.score == RouterScore::Softmax && options_.n_group == 1) {
    auto [values, indices] = at::topk(scores, options_.top_k, -1);
    r.experts = indices;
    r.gates = values;
  } else {
    r.experts = std::get<1>(at::topk(choice, options_.top_k, -1));
    r.gates = scores.gather(1, r.experts);
  }
  // The epsilon (Hugging Face's) only matters when every sigmoid score underflows.
  if (options_.norm_topk_prob) r.gates = r.gates / (r.gates.sum(-1, true) + 1e-20);
  if (options_.routed_scaling_factor != 1.0) r.gates = r.gates * options_.routed_scaling_factor;
  return r;
}

at::Tensor TopKRouter::limit_to_best_groups(const at::Tensor& choice) const {
  const int64_t tokens = choice.size(0), groups = options_.n_group;
  const at::Tensor grouped = choice.view({tokens, groups, -1});
  // DeepSeek-V3's group score: the sum of the group's two best choice scores.
  const at::Tensor group_scores = std::get<0>(at::topk(grouped, 2, -1)).sum(-1);
  const at::Tensor best = std::get<1>(at::topk(group_scores, options_.topk_group, -1));
  const at::Tensor kept = at::zeros({tokens, groups}, choice.options().dtype(at::kBool)).scatter(1, best, true);
  return grouped.masked_fill(kept.logical_not().unsqueeze(-1), -std::numeric_limits<float>::infinity())
      .view({tokens, -1});
}
RouterStatistics TopKRouter::statistics(const Routing& r) const {
  const at::Tensor counts = at::bincount(r.experts.reshape({-1}), {}, options_.num_experts).to(at::kFloat);
  const at::Tensor prob_sums = r.probs.sum(0);
  const at::Tensor z_sum = at::logsumexp(r.logits, -1).pow(2).sum().reshape({1});
  const bool sharded = tp_.mode == TpMode::ReduceScatter && tp_.size > 1;
  // Context parallelism: the micro-batch's other tokens are on the other cp ranks.
  const ContextParallel cp = ContextParallel::of(tp_.host);
  // One collective for all of it: [counts (E), probability sums (E), z sum, tokens].
  at::Tensor totals = at::cat({counts, prob_sums.detach(), z_sum.detach(),
                               at::full({1}, static_cast<double>(r.logits.size(0)), counts.options())});
  if (sharded) tp_.host.all_reduce(TRIAX_GROUP_TP, totals);
  if (cp.active()) cp.host.all_reduce(TRIAX_GROUP_CP, totals);
  const int64_t e = options_.num_experts;
  const at::Tensor all_counts = totals.narrow(0, 0, e), all_prob_sums = totals.narrow(0, e, e);
  const at::Tensor tokens = totals.narrow(0, 2 * e + 1, 1).reshape({});
  const at::Tensor assignment_share = all_counts / (tokens * static_cast<double>(options_.top_k));
  RouterStatistics s;
  // Each rank's term is differentiable in its own tokens; its value is lifted to the whole sum.
  const double experts = static_cast<double>(e);
  at::Tensor own_balance = experts * (assignment_share * prob_sums).sum() / tokens;
  at::Tensor own_z = z_sum.reshape({}) / tokens;
  if (sharded || cp.active()) {
    // Gradients are averaged over cp (summed over tp): each cp rank's own term counts cp times.
    own_balance = own_balance * cp.size;
    own_z = own_z * cp.size;
    own_balance = own_balance + (experts * (assignment_share * all_prob_sums).sum() / tokens - own_balance).detach();
    own_z = own_z + (totals.narrow(0, 2 * e, 1).reshape({}) / tokens - own_z).detach();
  }
  s.balance = own_balance;
  s.z_loss = own_z;
  const at::Tensor load = assignment_share * experts;  // 1 = the uniform share
  s.load_min = load.min();
  s.load_max = load.max();
  s.load_cv = load.std(/*unbiased=*/false) / load.mean();
  return s;
}

}  // namespace triax::moe
