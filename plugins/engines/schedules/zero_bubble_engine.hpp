// What the zero-bubble engines (zb_h1, zb_v) share: the checks of a step against the layout, the
// schedule of each micro-batch count, computed once for the stage times of
// parallelism.pp_pass_times (equal without it), and its run through a PipelineStage that splits
// every backward into B and W (the SDK's linear layers then defer their weight gradients until W:
// triax/layers/deferred_weight_gradients.hpp). Header only, like schedule_runner.hpp.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schedule_runner.hpp"
#include "triax/config_reader.hpp"
#include "triax/plugin.hpp"
#include "zero_bubble_schedule.hpp"

namespace triax::plugins {

class ZeroBubbleEngine : public Engine {
 public:
  ZeroBubbleEngine(std::string name, EngineContext context, ZeroBubbleLayout layout)
      : name_(std::move(name)), context_(std::move(context)), layout_(layout), times_(pass_times(context_)) {}

  // Read by the host before it builds the model (triax_engine_vtable.model_chunks, chunk_placement).
  int model_chunks() const { return layout_.chunks; }
  triax_chunk_placement chunk_placement() const { return layout_.placement; }

  StepResult train_step(const StepRequest& request) override {
    if (request.chunk_count() != layout_.chunks)
      throw Error(TRIAX_ERROR_UNSUPPORTED, name_ + ": runs " + std::to_string(layout_.chunks) +
                                               " model chunk(s) per pipeline rank, the host gave " +
                                               std::to_string(request.chunk_count()));
    const ScheduleShape shape{context_.pp_size, layout_.chunks, request.micro_batches()};
    check(name_, shape);
    auto found = schedules_.find(shape.micro_batches);
    if (found == schedules_.end())
      found = schedules_
                  .emplace(shape.micro_batches,
                           steps_for_rank(zero_bubble_schedule(shape, layout_, name_, times_), context_))
                  .first;
    PipelineStage stage(context_, request, {layout_.placement, /*split_backward=*/true});
    run_steps(stage, found->second);
    return stage.finish();
  }

 protected:
  // What the config decides, refused before step 1 where the host tells the micro-batch count
  // (ABI 1.1) and whether it places chunks other than interleaved (ABI 1.13).
  static void check_context(const std::string& name, const EngineContext& context, const ZeroBubbleLayout& layout) {
    if (layout.placement != TRIAX_CHUNKS_INTERLEAVED && !context.host_places_chunks)
      throw Error(TRIAX_ERROR_UNSUPPORTED, name + " places its model chunks in a " +
                                               chunk_placement_name(layout.placement) +
                                               ", which needs a host of ABI 1.13 or later");
    if (context.micro_batches != 0) check(name, {context.pp_size, layout.chunks, context.micro_batches});
    pass_times(context);
  }

  // parallelism.pp_pass_times: [F, B, W] of one stage, or equal times.
  static PassTimes pass_times(const EngineContext& context) {
    ConfigReader reader(context.parallelism, "parallelism");
    const std::optional<std::vector<double>> times = reader.optional<std::vector<double>>("pp_pass_times");
    if (!times) return PassTimes{};
    if (times->size() != 3 || !((*times)[0] > 0 && (*times)[1] > 0 && (*times)[2] > 0))
      reader.fail("pp_pass_times", "expected three times above 0: [forward, input backward, weight backward]");
    return PassTimes{(*times)[0], (*times)[1], (*times)[2], 0.0};
  }

 private:
  static void check(const std::string& name, const ScheduleShape& shape) {
    const std::string problem = zero_bubble_shape_problem(name, shape);
    if (!problem.empty()) throw Error(TRIAX_ERROR_INVALID_CONFIG, problem);
  }

  std::string name_;
  EngineContext context_;
  ZeroBubbleLayout layout_;
  PassTimes times_;
  std::map<int, std::vector<ScheduleStep>> schedules_;  // this rank's steps, by micro-batch count
};

}  // namespace triax::plugins
