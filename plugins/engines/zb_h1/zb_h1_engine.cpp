// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B with every backward
// split into B, the input gradients the previous stage waits for, and W, the weight gradients
// nothing waits for. Forwards and B keep 1F1B's order; a rank runs its oldest waiting W whenever
// its next F or B has no input yet, and holds at most pp micro-batches between F and W, the
// most 1F1B holds. With equal F, B and W times the bubble is a third of 1F1B's
// (zero_bubble_schedule.hpp in plugins/engines/schedules; docs/pipeline-schedules.md).
#include "zero_bubble_engine.hpp"

namespace triax::plugins {

class ZeroBubbleH1Engine final : public ZeroBubbleEngine {
 public:
  explicit ZeroBubbleH1Engine(const EngineContext& context)
      : ZeroBubbleEngine("zb_h1", context, zb_h1_layout(context.pp_size)) {}

  static std::unique_ptr<ZeroBubbleH1Engine> create(const EngineContext& context) {
    check_context("zb_h1", context, zb_h1_layout(context.pp_size));
    return std::make_unique<ZeroBubbleH1Engine>(context);
  }
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::engine_plugin<triax::plugins::ZeroBubbleH1Engine>(
    "zb_h1", "1.0.0", "Zero-bubble H1: 1F1B's memory, each backward split into B and W, W filling the bubbles"))
