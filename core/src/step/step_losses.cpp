#include "step/step_losses.hpp"

#include <ATen/ATen.h>

#include "triax/core/comm/communicator.hpp"

namespace triax {

at::Tensor StepLosses::reduce(const EngineInstance::Result& result, Communicator& communicator,
                              const c10::Device& device) const {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kFloat).device(device);
  auto scalar = [&](const at::Tensor& value) {
    return value.defined() ? value.detach().to(options).reshape({}) : at::zeros({}, options);
  };
  std::vector<at::Tensor> parts{scalar(result.loss)};
  for (size_t i = 0; i < aux_names_.size(); ++i)
    parts.push_back(scalar(i < result.aux_losses.size() ? result.aux_losses[i] : at::Tensor()));
  parts.push_back(scalar(result.aux_loss));
  parts.push_back(at::full({}, result.aux_loss.defined() ? 1.0 : 0.0, options));
  at::Tensor values = at::stack(parts);
  if (communicator.size(TRIAX_GROUP_PP) > 1) communicator.all_reduce(TRIAX_GROUP_PP, values, TRIAX_REDUCE_SUM);
  // Each cp rank's loss is its share of its sequences' mean, scaled so that the average over the
  // cp group is that mean (triax/layers/context_parallel.hpp): averaged over dp x cp like gradients.
  const triax_group replicas = communicator.size(TRIAX_GROUP_CP) > 1 ? TRIAX_GROUP_DP_CP : TRIAX_GROUP_DP;
  if (communicator.size(replicas) > 1) communicator.all_reduce(replicas, values, TRIAX_REDUCE_AVG);
  return values;
}

std::vector<std::pair<std::string, double>> StepLosses::aux_losses(const at::Tensor& values) const {
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < aux_names_.size(); ++i)
    out.emplace_back(aux_names_[i], values[static_cast<int64_t>(i + 1)].item<double>());
  const auto unnamed = static_cast<int64_t>(aux_names_.size() + 1);
  if (values[unnamed + 1].item<double>() > 0) out.emplace_back("aux_loss", values[unnamed].item<double>());
  return out;
}

}  // namespace triax
