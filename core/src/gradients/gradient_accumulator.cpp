#include "gradients/gradient_accumulator.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "triax/error.hpp"

namespace triax {

GradientHandoff choose_gradient_handoff(const GradientHandoffInputs& in) {
  const bool summed_after_backward = in.micro_batches > 1 || in.tied_across_stages;
  return in.accumulate_grad_in_fp32 && !summed_after_backward && in.optimizer_takes_scaled_gradients
             ? GradientHandoff::kAsComputed
             : GradientHandoff::kFp32;
}

GradientAccumulator::GradientAccumulator(const std::vector<NamedParameter>& parameters, bool accumulate_in_fp32,
                                         GradientHandoff handoff)
    : parameters_(parameters), handoff_(handoff) {
  bool any_low_precision = false;
  for (const auto& p : parameters_)
    any_low_precision |= p.tensor.scalar_type() != at::kFloat && p.tensor.scalar_type() != at::kDouble;
  if (handoff_ == GradientHandoff::kFp32 && accumulate_in_fp32 && any_low_precision)
    for (const auto& p : parameters_)
      buffers_.push_back(at::empty(p.tensor.sizes(), p.tensor.options().dtype(at::kFloat)));
  zero_flags();
}

void GradientAccumulator::zero_flags() {
  holds_gradient_.assign(handoff_ == GradientHandoff::kAsComputed ? parameters_.size() : buffers_.size(), false);
}

void GradientAccumulator::zero() {
  for (const auto& p : parameters_) p.tensor.mutable_grad() = at::Tensor();
  zero_flags();
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
  if (handoff_ == GradientHandoff::kAsComputed) {
    for (size_t i = first; i < std::min(end, parameters_.size()); ++i) {
      if (!parameters_[i].tensor.grad().defined()) continue;
      if (holds_gradient_[i])
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                    "gradients are handed over as computed (one micro-batch a step), but a second backward reached '" +
                        parameters_[i].name + "' in this step");
      holds_gradient_[i] = true;
    }
    return;
  }
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
  const bool as_computed = handoff_ == GradientHandoff::kAsComputed;
  if (!grad.defined())
    final = at::zeros(tensor.sizes(), as_computed ? tensor.options() : tensor.options().dtype(at::kFloat));
  else if (as_computed || grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kDouble)
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
