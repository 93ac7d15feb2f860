// 1F1B ("one forward, one backward"): pipeline rank r of P first runs P - r - 1 warm-up
// forwards, then alternates one forward with one backward, then drains the remaining backwards.
// The last stage starts a backward as soon as a micro-batch reaches it, so rank r holds at
// most P - r micro-batches of activations instead of all of them (AFAB), with the same bubble.
#include "triax/pipeline_stage.hpp"
#include "triax/plugin.hpp"

namespace triax::plugins {

class OneForwardOneBackwardEngine final : public Engine {
 public:
  explicit OneForwardOneBackwardEngine(EngineContext context) : context_(std::move(context)) {}

  static std::unique_ptr<OneForwardOneBackwardEngine> create(const EngineContext& context) {
    if (context.micro_batches != 0) check_micro_batches(context.micro_batches, context.pp_size);  // 0: not told
    return std::make_unique<OneForwardOneBackwardEngine>(context);
  }

  StepResult train_step(const StepRequest& request) override {
    const int count = request.micro_batches();
    check_micro_batches(count, context_.pp_size);
    PipelineStage stage(context_, request);
    const int warm_up = std::min(context_.pp_size - context_.pp_rank - 1, count);
    int forwarded = 0, backpropagated = 0;
    for (; forwarded < warm_up; ++forwarded) stage.forward(forwarded);
    while (forwarded < count) {  // steady state
      stage.forward(forwarded++);
      stage.backward(backpropagated++);
    }
    while (backpropagated < count) stage.backward(backpropagated++);  // cool-down
    return stage.finish();
  }

 private:
  // With fewer micro-batches than pp - 1 the pipeline never fills: 1F1B's schedule (and its
  // memory bound) would not hold, and the bubble would dominate the step.
  static void check_micro_batches(int count, int pp_size) {
    if (count < std::max(1, pp_size - 1))
      throw Error(TRIAX_ERROR_INVALID_CONFIG,
                  "tokens.batch_accumulation_per_replica: 1f1b needs at least pp - 1 = " + std::to_string(pp_size - 1) +
                      " micro-batches per step, got " + std::to_string(count) +
                      " (raise it, or use parallelism.pp_engine: afab)");
  }

  EngineContext context_;
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::engine_plugin<triax::plugins::OneForwardOneBackwardEngine>(
    "1f1b", "1.0.0", "One-forward-one-backward pipeline schedule: at most pp - pp_rank micro-batches in flight"))
