// Interleaved 1F1B (Megatron-LM's virtual pipeline): each pipeline rank holds
// parallelism.pp_chunks_per_rank model chunks instead of one contiguous run of blocks, so a
// micro-batch visits every rank once per chunk. The pipeline fills and drains in smaller pieces:
// the bubble shrinks by the chunk count, for chunk-count times as many point-to-point transfers.
// With one chunk it is plain 1F1B. interleaved_schedule.hpp (plugins/engines/schedules) holds the
// order of passes and the placement of transfers; this file asks the host for the chunks and runs
// the schedule.
#include <map>

#include "interleaved_schedule.hpp"
#include "schedule_runner.hpp"
#include "triax/config_reader.hpp"
#include "triax/plugin.hpp"

namespace triax::plugins {

class InterleavedOneForwardOneBackwardEngine final : public Engine {
 public:
  InterleavedOneForwardOneBackwardEngine(EngineContext context, int chunks)
      : context_(std::move(context)), chunks_(chunks) {}

  static std::unique_ptr<InterleavedOneForwardOneBackwardEngine> create(const EngineContext& context) {
    const int chunks = chunks_per_rank(context.parallelism);
    // The micro-batch count is checked here when the host says it (ABI 1.1), else at each step.
    check({context.pp_size, chunks, context.micro_batches != 0 ? context.micro_batches : context.pp_size});
    return std::make_unique<InterleavedOneForwardOneBackwardEngine>(context, chunks);
  }

  // Read by the host before it builds the model (triax_engine_vtable.model_chunks).
  int model_chunks() const { return chunks_; }

  StepResult train_step(const StepRequest& request) override {
    if (request.chunk_count() != chunks_)
      throw Error(TRIAX_ERROR_UNSUPPORTED,
                  "interleaved_1f1b: asked for " + std::to_string(chunks_) +
                      " model chunks per pipeline rank, the host gave " + std::to_string(request.chunk_count()) +
                      " (a host before ABI 1.3 gives one: set parallelism.pp_chunks_per_rank: 1)");
    const ScheduleShape shape{context_.pp_size, chunks_, request.micro_batches()};
    check(shape);
    auto found = schedules_.find(shape.micro_batches);
    if (found == schedules_.end())
      found = schedules_.emplace(shape.micro_batches, steps_for_rank(interleaved_schedule(shape), context_)).first;

    PipelineStage stage(context_, request);
    run_steps(stage, found->second);
    return stage.finish();
  }

 private:
  static int chunks_per_rank(const YAML::Node& parallelism) {
    ConfigReader reader(parallelism, "parallelism");
    return static_cast<int>(reader.get<int64_t>("pp_chunks_per_rank", 1));
  }

  static void check(const ScheduleShape& shape) {
    const std::string problem = schedule_shape_problem(shape);
    if (!problem.empty()) throw Error(TRIAX_ERROR_INVALID_CONFIG, problem);
  }

  EngineContext context_;
  int chunks_;
  std::map<int, std::vector<ScheduleStep>> schedules_;  // this rank's steps, by micro-batch count
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::engine_plugin<triax::plugins::InterleavedOneForwardOneBackwardEngine>(
    "interleaved_1f1b", "1.0.0",
    "Interleaved 1F1B (virtual pipeline): parallelism.pp_chunks_per_rank model chunks per pipeline rank"))
