#include "triax/core/gradient_accumulator.hpp"

#include <ATen/ATen.h>

#include "triax/core/communicator.hpp"

namespace triax {

GradientAccumulator::GradientAccumulator(const std::vector<NamedParameter>& parameters, bool accumulate_in_fp32)
    : parameters_(parameters) {
  bool any_low_precision = false;
  for (const auto& p : parameters_)
    any_low_precision |= p.tensor.scalar_type() != at::kFloat && p.tensor.scalar_type() != at::kDouble;
  if (accumulate_in_fp32 && any_low_precision)
    for (const auto& p : parameters_)
      buffers_.push_back(at::zeros(p.tensor.sizes(), p.tensor.options().dtype(at::kFloat)));
}

void GradientAccumulator::zero() {
  for (const auto& p : parameters_) p.tensor.mutable_grad() = at::Tensor();
  for (auto& buffer : buffers_) buffer.zero_();
  gradients_.clear();
}

void GradientAccumulator::after_backward() {
  if (buffers_.empty()) return;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& grad = parameters_[i].tensor.mutable_grad();
    if (!grad.defined()) continue;
    buffers_[i].add_(grad);
    grad = at::Tensor();  // the next micro-batch starts a fresh low-precision gradient
  }
}

const std::vector<at::Tensor>& GradientAccumulator::gradients() {
  if (!gradients_.empty()) return gradients_;
  gradients_.reserve(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!buffers_.empty()) {
      gradients_.push_back(buffers_[i]);
      continue;
    }
    const at::Tensor& grad = parameters_[i].tensor.grad();
    const auto& tensor = parameters_[i].tensor;
    if (!grad.defined())
      gradients_.push_back(at::zeros(tensor.sizes(), tensor.options().dtype(at::kFloat)));
    else if (grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kDouble)
      gradients_.push_back(grad);
    else
      gradients_.push_back(grad.to(at::kFloat));
  }
  return gradients_;
}

at::Tensor GradientAccumulator::clip(std::optional<double> max_norm, Communicator& communicator) {
  const std::vector<at::Tensor>& grads = gradients();
  const int tp_rank = communicator.rank(TRIAX_GROUP_TP);
  std::vector<at::Tensor> counted;
  for (size_t i = 0; i < grads.size(); ++i) {
    const uint32_t flags = parameters_[i].spec.flags;
    if ((flags & TRIAX_PARAM_TP_REPLICATED) && tp_rank != 0) continue;
    counted.push_back(grads[i]);
  }
  at::Tensor squared =
      at::zeros({}, grads.empty() ? at::TensorOptions().dtype(at::kFloat) : grads.front().options().dtype(at::kFloat));
  if (!counted.empty()) {
    std::vector<at::Tensor> norms = at::_foreach_norm(counted, 2);
    squared = at::stack(norms).to(at::kFloat).pow(2).sum();
  }
  communicator.all_reduce(TRIAX_GROUP_MP, squared, TRIAX_REDUCE_SUM);
  at::Tensor norm = squared.sqrt();
  if (max_norm && !grads.empty()) {
    at::Tensor coefficient = (*max_norm / (norm + 1e-6)).clamp_max(1.0);
    std::vector<at::Tensor> mutable_grads(grads.begin(), grads.end());
    at::_foreach_mul_(mutable_grads, coefficient);
  }
  return norm;
}

}  // namespace triax
