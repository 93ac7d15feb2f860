// Gradients of one optimizer step, accumulated over micro-batches (in fp32 buffers when the
// parameters are lower precision and accumulate_grad_in_fp32 is set). DataParallelGradients
// then averages them over dp and clips them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "triax/parameter.hpp"

namespace triax {

class GradientAccumulator {
 public:
  // `parameters` are this rank's; fp32 buffers are used for non-fp32 parameters when
  // `accumulate_in_fp32`.
  GradientAccumulator(const std::vector<NamedParameter>& parameters, bool accumulate_in_fp32);

  // Before the first micro-batch of a step.
  void zero();
  // After each micro-batch's backward: folds parameter gradients into the fp32 buffers; only
  // those of parameters [first, end) after a backward through one model chunk.
  void after_backward(size_t first = 0, size_t end = SIZE_MAX);
  // fp32 gradients, one per parameter (zeros for parameters that received none).
  const std::vector<at::Tensor>& gradients();
  // Parameter i's entry of gradients(), once its last micro-batch's gradient has arrived (possibly
  // while the backward still runs for other parameters): folded, then fixed for this step.
  const at::Tensor& final_gradient(size_t i);
  bool uses_fp32_buffers() const { return !buffers_.empty(); }

 private:
  // Buffer i takes a micro-batch's gradient: copied into it when it holds none yet this step
  // (one conversion instead of zeroing it and adding), added to it afterwards.
  void fold(size_t i, at::Tensor& grad);

  std::vector<NamedParameter> parameters_;
  std::vector<at::Tensor> buffers_;  // fp32, when accumulating in fp32 for low-precision params
  std::vector<bool> holds_gradient_;  // per buffer: written this step
  std::vector<at::Tensor> gradients_;
};

}  // namespace triax
