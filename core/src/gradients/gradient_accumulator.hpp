// Gradients of one optimizer step, accumulated over micro-batches (in fp32 buffers when the
// parameters are lower precision and accumulate_grad_in_fp32 is set), or handed over as the one
// micro-batch's backward computed them. DataParallelGradients then averages them over dp.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "triax/parameter.hpp"

namespace triax {

// What gradients() hands over.
enum class GradientHandoff {
  // fp32 (fp64 for fp64 parameters): the fp32 buffers' sums, or fp32 copies of the .grad that
  // autograd accumulated in the parameter's dtype.
  kFp32,
  // Each parameter's .grad as the backward computed it, in the parameter's dtype. Only for a step
  // of one micro-batch with nothing summed afterwards: fp32 buffers would hold the same values
  // upcast, at 4 bytes a parameter.
  kAsComputed,
};

// What decides the handoff: the step's shape and who sums gradients in place after the backward
// (the data-parallel reduction does not: it reduces an fp32 copy of a low-precision gradient).
struct GradientHandoffInputs {
  bool accumulate_grad_in_fp32 = true;
  int64_t micro_batches = 1;        // per step and replica
  bool tied_across_stages = false;  // summed over pipeline ranks in place
  bool optimizer_takes_scaled_gradients = false;  // ABI 1.8: reads low precision, applies clipping
};

// kAsComputed when accumulate_grad_in_fp32 asks for fp32 and yet nothing would be summed into the
// buffers: one micro-batch, no pipeline ties, and an optimizer that reads the gradients as they
// are. Otherwise kFp32.
GradientHandoff choose_gradient_handoff(const GradientHandoffInputs& inputs);

class GradientAccumulator {
 public:
  // `parameters` are this rank's; with kFp32, fp32 buffers are used for non-fp32 parameters when
  // `accumulate_in_fp32`.
  GradientAccumulator(const std::vector<NamedParameter>& parameters, bool accumulate_in_fp32,
                      GradientHandoff handoff = GradientHandoff::kFp32);

  // Before the first micro-batch of a step.
  void zero();
  // After each micro-batch's backward: folds parameter gradients into the fp32 buffers; only
  // those of parameters [first, end) after a backward through one model chunk. With kAsComputed
  // a second gradient for a parameter in one step is an error.
  void after_backward(size_t first = 0, size_t end = SIZE_MAX);
  // One gradient per parameter (zeros for parameters that received none), as the handoff says.
  const std::vector<at::Tensor>& gradients();
  // Parameter i's entry of gradients(), once its last micro-batch's gradient has arrived (possibly
  // while the backward still runs for other parameters): folded, then fixed for this step.
  const at::Tensor& final_gradient(size_t i);
  bool uses_fp32_buffers() const { return !buffers_.empty(); }
  GradientHandoff handoff() const { return handoff_; }

 private:
  // Buffer i takes a micro-batch's gradient: copied into it when it holds none yet this step
  // (one conversion instead of zeroing it and adding), added to it afterwards.
  void fold(size_t i, at::Tensor& grad);
  void zero_flags();

  std::vector<NamedParameter> parameters_;
  GradientHandoff handoff_;
  std::vector<at::Tensor> buffers_;  // fp32, when accumulating in fp32 for low-precision params
  std::vector<bool> holds_gradient_;  // per buffer (kFp32) or parameter (kAsComputed): written this step
  std::vector<at::Tensor> gradients_;
};

}  // namespace triax
