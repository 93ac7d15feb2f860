#include "router.hpp"

#include <ATen/ATen.h>

#include "triax/layers/context_parallel.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"

namespace triax::moe {

TopKRouter::TopKRouter(int64_t hidden_size, int64_t num_experts, int64_t top_k, bool norm_topk_prob,
                       const ModelContext& context)
    : num_experts_(num_experts), top_k_(top_k), norm_topk_prob_(norm_topk_prob), tp_(TensorParallel::of(context)) {
  at::Tensor value = at::empty({num_experts, hidden_size}, at::TensorOptions().device(context.device).dtype(context.dtype));
  weight = register_parameter_with_spec("weight", value, ParameterSpec::replicated(value, 0, ParameterRole::Matrix));
}

Routing TopKRouter::route(const at::Tensor& tokens) {
  Routing r;
  const at::Tensor w = replicated_on_sequence_shard(weight, tp_);
  // The scores in fp32 whatever the model's dtype: top-k on bf16 probabilities ties too often.
  r.logits = at::linear(tokens.to(at::kFloat), w.to(at::kFloat));
  r.probs = at::softmax(r.logits, -1);
  auto [values, indices] = at::topk(r.probs, top_k_, -1);
  r.experts = indices;
  r.gates = norm_topk_prob_ ? values / values.sum(-1, true) : values;
  return r;
}

RouterStatistics TopKRouter::statistics(const Routing& r) const {
  const at::Tensor counts = at::bincount(r.experts.reshape({-1}), {}, num_experts_).to(at::kFloat);
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
  const int64_t e = num_experts_;
  const at::Tensor all_counts = totals.narrow(0, 0, e), all_prob_sums = totals.narrow(0, e, e);
  const at::Tensor tokens = totals.narrow(0, 2 * e + 1, 1).reshape({});
  const at::Tensor assignment_share = all_counts / (tokens * static_cast<double>(top_k_));
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
