#include "triax/core/gradients/gradient_accumulator.hpp"

#include <ATen/ATen.h>

#include <algorithm>

namespace triax {

GradientAccumulator::GradientAccumulator(const std::vector<NamedParameter>& parameters, bool accumulate_in_fp32)
    : parameters_(parameters) {
  bool any_low_precision = false;
  for (const auto& p : parameters_)
    any_low_precision |= p.tensor.scalar_type() != at::kFloat && p.tensor.scalar_type() != at::kDouble;
  if (accumulate_in_fp32 && any_low_precision)
    for (const auto& p : parameters_)
      buffers_.push_back(at::empty(p.tensor.sizes(), p.tensor.options().dtype(at::kFloat)));
  holds_gradient_.assign(buffers_.size(), false);
}

void GradientAccumulator::zero() {
  for (const auto& p : parameters_) p.tensor.mutable_grad() = at::Tensor();
  holds_gradient_.assign(buffers_.size(), false);
  gradients_.clear();
}

void GradientAccumulator::fold(size_t i, at::Tensor& grad) {
  if (holds_gradient_[i])
    buffers_[i].add_(grad);
  else
    buffers_[i].copy_(grad);
  holds_gradient_[i] = true;
  grad = at::Tensor();  // the next micro-batch starts a fresh low-precision gradient
}

void GradientAccumulator::after_backward(size_t first, size_t end) {
  if (buffers_.empty()) return;
  for (size_t i = first; i < std::min(end, parameters_.size()); ++i) {
    at::Tensor& grad = parameters_[i].tensor.mutable_grad();
    if (grad.defined()) fold(i, grad);
  }
}

const at::Tensor& GradientAccumulator::final_gradient(size_t i) {
  if (gradients_.size() != parameters_.size()) gradients_.assign(parameters_.size(), at::Tensor());
  at::Tensor& final = gradients_[i];
  if (final.defined()) return final;
  const auto& tensor = parameters_[i].tensor;
  if (!buffers_.empty()) {
    at::Tensor& grad = tensor.mutable_grad();
    if (grad.defined()) fold(i, grad);  // the last micro-batch's, not folded by after_backward yet
    if (!holds_gradient_[i]) {          // no micro-batch reached this parameter
      buffers_[i].zero_();
      holds_gradient_[i] = true;
    }
    final = buffers_[i];
    return final;
  }
  const at::Tensor& grad = tensor.grad();
  if (!grad.defined())
    final = at::zeros(tensor.sizes(), tensor.options().dtype(at::kFloat));
  else if (grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kDouble)
    final = grad;
  else
    final = grad.to(at::kFloat);
  return final;
}

const std::vector<at::Tensor>& GradientAccumulator::gradients() {
  for (size_t i = 0; i < parameters_.size(); ++i) final_gradient(i);
  return gradients_;
}

}  // namespace triax
