#include "triax/core/gradients/gradient_norm.hpp"

#include <ATen/ATen.h>

#include "triax/core/comm/communicator.hpp"
#include "triax/error.hpp"

namespace triax {

at::Tensor clip_by_global_norm(const std::vector<at::Tensor>& gradients, const std::vector<bool>& counted,
                               std::optional<double> max_norm, Communicator& communicator, triax_group group) {
  if (counted.size() != gradients.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "gradient norm: " + std::to_string(counted.size()) +
                                                  " counted-in-norm flags for " + std::to_string(gradients.size()) +
                                                  " gradients");
  std::vector<at::Tensor> summed, nonempty;
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (gradients[i].numel() == 0) continue;  // an empty ZeRO shard
    nonempty.push_back(gradients[i]);
    if (counted[i]) summed.push_back(gradients[i]);
  }
  at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
  if (!gradients.empty()) options = gradients.front().options().dtype(at::kFloat);
  at::Tensor squared = at::zeros({}, options);
  if (!summed.empty()) squared = at::stack(at::_foreach_norm(summed, 2)).to(at::kFloat).pow(2).sum();
  communicator.all_reduce(group, squared, TRIAX_REDUCE_SUM);
  at::Tensor norm = squared.sqrt();
  if (max_norm && !nonempty.empty()) {
    at::Tensor coefficient = (*max_norm / (norm + 1e-6)).clamp_max(1.0);
    at::_foreach_mul_(nonempty, coefficient);
  }
  return norm;
}

}  // namespace triax
