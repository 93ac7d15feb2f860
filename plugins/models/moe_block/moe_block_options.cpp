#include "moe_block_options.hpp"

#include "triax/error.hpp"

namespace triax::moe {
namespace {

// Weight matrices per expert: gate, up and down, or up and down.
int64_t projections(ExpertActivation activation) { return activation == ExpertActivation::SwiGlu ? 3 : 2; }

}  // namespace

void MoeBlockOptions::check(const std::function<void(const std::string&, const std::string&)>& fail) const {
  auto positive = [&](const char* field, int64_t value) {
    if (value > 0) return true;
    fail(field, "must be positive, got " + std::to_string(value));
    return false;
  };
  if (!positive("num_experts", num_experts) || !positive("top_k", top_k) ||
      !positive("expert_intermediate_size", expert_intermediate_size) || !positive("n_group", n_group) ||
      !positive("topk_group", topk_group))
    return;
  if (shared_expert != SharedExpert::None && !positive("shared_expert_intermediate_size", shared_expert_intermediate_size))
    return;
  if (top_k > num_experts)
    return fail("top_k", std::to_string(top_k) + " is larger than num_experts (" + std::to_string(num_experts) +
                             "): a token cannot be routed to more experts than there are");
  if (!(routed_scaling_factor > 0.0))
    return fail("routed_scaling_factor", "must be positive, got " + std::to_string(routed_scaling_factor));
  if (n_group == 1) return;
  if (num_experts % n_group != 0)
    return fail("n_group", std::to_string(n_group) + " does not divide num_experts (" + std::to_string(num_experts) + ")");
  const int64_t per_group = num_experts / n_group;
  // A group's score is the sum of its two best experts' choice scores.
  if (per_group < 2)
    return fail("n_group", std::to_string(n_group) + " groups of " + std::to_string(num_experts) +
                               " experts leave fewer than two experts per group");
  if (topk_group > n_group)
    return fail("topk_group", std::to_string(topk_group) + " is larger than n_group (" + std::to_string(n_group) + ")");
  if (top_k > topk_group * per_group)
    return fail("top_k", std::to_string(top_k) + " is more than the " + std::to_string(topk_group * per_group) +
                             " experts of topk_group (" + std::to_string(topk_group) + ") groups");
}

double MoeBlockOptions::multiply_adds_per_token() const {
  const double h = static_cast<double>(hidden_size);
  const double p = static_cast<double>(projections(activation));
  double total = h * static_cast<double>(num_experts) +  // router
                 static_cast<double>(top_k) * p * h * static_cast<double>(expert_intermediate_size);
  if (shared_expert != SharedExpert::None)
    total += p * h * static_cast<double>(shared_expert_intermediate_size) + (shared_expert == SharedExpert::Gated ? h : 0.0);
  return total;
}

int64_t MoeBlockOptions::parameter_count() const {
  const int64_t h = hidden_size, p = projections(activation);
  int64_t total = num_experts * (h + p * h * expert_intermediate_size);  // the router's rows and the experts
  if (shared_expert != SharedExpert::None)
    total += p * h * shared_expert_intermediate_size + (shared_expert == SharedExpert::Gated ? h : 0);
  if (score == RouterScore::Sigmoid) total += num_experts;  // e_score_correction_bias
  return total;
}

RouterScore router_score_of(const std::string& name) {
  if (name == "softmax") return RouterScore::Softmax;
  if (name == "sigmoid") return RouterScore::Sigmoid;
  throw Error(TRIAX_ERROR_INVALID_CONFIG, "router score '" + name + "': expected softmax or sigmoid");
}

ExpertActivation expert_activation_of(const std::string& name) {
  if (name == "swiglu" || name == "silu") return ExpertActivation::SwiGlu;
  if (name == "relu2") return ExpertActivation::SquaredRelu;
  throw Error(TRIAX_ERROR_INVALID_CONFIG, "expert activation '" + name + "': expected swiglu (or silu) or relu2");
}

}  // namespace triax::moe
