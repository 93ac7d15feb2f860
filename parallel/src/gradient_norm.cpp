#include "triax/parallel/gradient_norm.hpp"

#include <ATen/ATen.h>

#include "triax/core/comm/communicator.hpp"
#include "triax/error.hpp"

namespace triax {

namespace {

// Per-gradient L2 norms summed in fp32. A low-precision gradient is read as it is on CUDA (the
// kernel accumulates in fp32 either way); on CPU it is converted first, so that its norm has the
// bits an fp32 copy of it would give.
std::vector<at::Tensor> fp32_norms(const std::vector<at::Tensor>& gradients) {
  std::vector<at::Tensor> full, low;
  std::vector<size_t> full_at, low_at;  // positions in `gradients`: the norms keep its order
  for (size_t i = 0; i < gradients.size(); ++i) {
    const at::Tensor& g = gradients[i];
    if (g.scalar_type() == at::kFloat || g.scalar_type() == at::kDouble) {
      full.push_back(g);
      full_at.push_back(i);
    } else {
      low.push_back(g.is_cuda() ? g : g.to(at::kFloat));
      low_at.push_back(i);
    }
  }
  std::vector<at::Tensor> norms(gradients.size());
  if (!full.empty()) {
    std::vector<at::Tensor> n = at::_foreach_norm(full, 2);
    for (size_t k = 0; k < n.size(); ++k) norms[full_at[k]] = n[k];
  }
  if (!low.empty()) {
    const bool as_they_are = low.front().is_cuda();
    std::vector<at::Tensor> n = as_they_are ? at::_foreach_norm(low, 2, at::kFloat) : at::_foreach_norm(low, 2);
    for (size_t k = 0; k < n.size(); ++k) norms[low_at[k]] = n[k];
  }
  return norms;
}

}  // namespace

GlobalNorm global_norm(const std::vector<at::Tensor>& gradients, const std::vector<bool>& counted,
                       std::optional<double> max_norm, Communicator& communicator, triax_group group) {
  if (counted.size() != gradients.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "gradient norm: " + std::to_string(counted.size()) +
                                                  " counted-in-norm flags for " + std::to_string(gradients.size()) +
                                                  " gradients");
  std::vector<at::Tensor> summed;
  bool any_nonempty = false;
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (gradients[i].numel() == 0) continue;  // an empty ZeRO shard
    any_nonempty = true;
    if (counted[i]) summed.push_back(gradients[i]);
  }
  at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
  if (!gradients.empty()) options = gradients.front().options().dtype(at::kFloat);
  at::Tensor squared = at::zeros({}, options);
  if (!summed.empty()) squared = at::stack(fp32_norms(summed)).to(at::kFloat).pow(2).sum();
  communicator.all_reduce(group, squared, TRIAX_REDUCE_SUM);
  GlobalNorm result;
  result.norm = squared.sqrt();
  if (max_norm && any_nonempty) result.coefficient = (*max_norm / (result.norm + 1e-6)).clamp_max(1.0);
  return result;
}

at::Tensor clip_by_global_norm(const std::vector<at::Tensor>& gradients, const std::vector<bool>& counted,
                               std::optional<double> max_norm, Communicator& communicator, triax_group group) {
  GlobalNorm result = global_norm(gradients, counted, max_norm, communicator, group);
  if (result.coefficient.defined()) {
    std::vector<at::Tensor> nonempty;
    for (const at::Tensor& g : gradients)
      if (g.numel() > 0) nonempty.push_back(g);
    at::_foreach_mul_(nonempty, result.coefficient);
  }
  return result.norm;
}

}  // namespace triax
