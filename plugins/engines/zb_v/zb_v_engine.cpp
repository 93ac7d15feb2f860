// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): two model chunks per pipeline
// rank in a V (TRIAX_CHUNKS_V: rank r holds virtual stages r and 2 pp - 1 - r, so rank 0 embeds
// and computes the loss and the last rank hands each micro-batch from its first chunk to its
// second in memory), every backward split into B and W. A rank runs the oldest B whose gradient
// has arrived, else the next F whose input has, else its oldest waiting W, holding at most 2 pp
// (chunk, micro-batch) pairs between F and W: pp micro-batches' worth of its activations, 1F1B's
// most. With equal F, B and W times the only idle time left is the last rank's wait for its
// first input (zero_bubble_schedule.hpp in plugins/engines/schedules; docs/pipeline-schedules.md).
#include "zero_bubble_engine.hpp"

namespace triax::plugins {

class ZeroBubbleVEngine final : public ZeroBubbleEngine {
 public:
  explicit ZeroBubbleVEngine(const EngineContext& context)
      : ZeroBubbleEngine("zb_v", context, zb_v_layout(context.pp_size)) {}

  static std::unique_ptr<ZeroBubbleVEngine> create(const EngineContext& context) {
    check_context("zb_v", context, zb_v_layout(context.pp_size));
    return std::make_unique<ZeroBubbleVEngine>(context);
  }
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::engine_plugin<triax::plugins::ZeroBubbleVEngine>(
    "zb_v", "1.0.0", "Zero-bubble V: two model chunks per rank in a V, each backward split into B and W"))
