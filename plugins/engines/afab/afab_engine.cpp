// AFAB ("all forward, all backward"): every micro-batch's forward runs first, then every
// backward, in order. Simple and robust; it keeps all micro-batches' activations alive at once
// (peak_live_micro_batches = micro-batch count), which 1F1B improves on.
//
// This engine drives a single pipeline stage (pp = 1); it refuses a larger pipeline at creation.
#include <ATen/ATen.h>

#include "triax/plugin.hpp"

namespace triax::plugins {

class AfabEngine final : public Engine {
 public:
  static std::unique_ptr<AfabEngine> create(const EngineContext& context) {
    if (context.pp_size != 1)
      throw Error(TRIAX_ERROR_UNSUPPORTED, "afab: pipeline parallel size " + std::to_string(context.pp_size) +
                                               " is not supported by this engine version (pp must be 1)");
    return std::make_unique<AfabEngine>();
  }

  StepResult train_step(const StepRequest& request) override {
    const int count = request.micro_batches();
    if (count < 1) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "afab: a step needs at least one micro-batch");
    std::vector<at::Tensor> losses;  // each still holds its micro-batch's autograd graph
    std::vector<at::Tensor> aux_losses;
    std::vector<at::Tensor> lm_losses;
    losses.reserve(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      StageOutput out = request.model().forward(request.micro_batch(i));
      if (!out.loss.defined()) throw Error("afab: the model returned no loss on the last pipeline stage");
      at::Tensor objective = out.aux_loss.defined() ? out.loss + out.aux_loss : out.loss;
      losses.push_back(objective);
      if (out.aux_loss.defined()) aux_losses.push_back(out.aux_loss.detach());
      lm_losses.push_back(out.loss.detach());
    }
    StepResult result;
    result.peak_live_micro_batches = count;
    for (int i = 0; i < count; ++i) {
      // Each micro-batch contributes 1/count of the step's mean loss.
      (losses[static_cast<size_t>(i)] / count).backward();
      losses[static_cast<size_t>(i)] = at::Tensor();  // frees this micro-batch's activations
      request.after_backward(i);
    }
    result.loss = at::stack(lm_losses).mean();
    if (!aux_losses.empty()) result.aux_loss = at::stack(aux_losses).mean();
    return result;
  }
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::engine_plugin<triax::plugins::AfabEngine>(
    "afab", "1.0.0", "All-forward-all-backward pipeline schedule (single stage in this version)"))
