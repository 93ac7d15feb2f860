// AFAB ("all forward, all backward"): every micro-batch's forward runs first, then every
// backward, in order. Simple and robust, but every stage keeps all micro-batches' activations
// alive at once (peak_live_micro_batches = micro-batch count), which 1F1B improves on.
#include "triax/pipeline_stage.hpp"
#include "triax/plugin.hpp"

namespace triax::plugins {

class AfabEngine final : public Engine {
 public:
  explicit AfabEngine(EngineContext context) : context_(std::move(context)) {}

  static std::unique_ptr<AfabEngine> create(const EngineContext& context) {
    return std::make_unique<AfabEngine>(context);
  }

  StepResult train_step(const StepRequest& request) override {
    const int count = request.micro_batches();
    if (count < 1) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "afab: a step needs at least one micro-batch");
    PipelineStage stage(context_, request);
    for (int i = 0; i < count; ++i) stage.forward(i);
    for (int i = 0; i < count; ++i) stage.backward(i);
    return stage.finish();
  }

 private:
  EngineContext context_;
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::engine_plugin<triax::plugins::AfabEngine>(
    "afab", "1.1.0", "All-forward-all-backward pipeline schedule: every forward, then every backward"))
