// The zero-bubble engines over 2 real ranks (mpi backend), with a toy model of 4 blocks, each an
// SDK column-parallel linear (so that their weight gradients are deferred) and a tanh. zb_v cuts
// it into 4 virtual stages in a V (rank 0 holds blocks 0 and 3, rank 1 blocks 1 and 2, handed over
// in memory); zb_h1 into 2 stages of 2 blocks. The loss and every gradient must equal the whole
// model's in one process; each rank must run its F, B and W in the schedule's order (seen from
// the model: the forward, the output gradient's arrival, the weight's gradient hook); the host's
// after_chunk_backward must see each (chunk, micro-batch) once, in order per chunk; the measured
// peak in flight must be the schedule's. An engine that never runs W is an error naming it, and a
// host before ABI 1.13 cannot place a V.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/function_hook.h>

#include <map>
#include <set>

#include "multi_rank_environment.hpp"
#include "test_plugin_registry.hpp"
#include "toy_pipeline_support.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/layers/linear.hpp"
#include "triax/pipeline_stage.hpp"
#include "triax/plugin.hpp"
#include "zero_bubble_schedule.hpp"

// A namespace of this file's own: the multi-rank test files compile together (tests/multi_rank.cmake)
// and share names such as kSeq or toy_vtable.
namespace triax::zero_bubble_pipeline_test {
namespace {

constexpr int kBlocks = 4;
constexpr int kMicroBatches = 4;
constexpr int64_t kWidth = 4;

std::vector<std::string>& events() {
  static std::vector<std::string> log;
  return log;
}

using testing::Feed;
using testing::Hooks;
using testing::token_ids;
using testing::toy_context;

int micro_batch_of(const at::Tensor& ids) {
  for (int i = 0; i < kMicroBatches; ++i)
    if (at::equal(ids, token_ids(i))) return i;
  throw Error("toy: unknown token ids");
}

// Logs the weight gradient's arrival on the chunk's first block: W of its next micro-batch.
struct WeightArrival : torch::autograd::PostAccumulateGradHook {
  explicit WeightArrival(int chunk) : chunk_(chunk) {}
  void operator()(const at::Tensor&) override {
    events().push_back("W" + std::to_string(chunk_) + "." + std::to_string(arrived_++));
  }
  int chunk_, arrived_ = 0;
};

class ToyLinearModel : public testing::ToyModel<ToyLinearModel, kBlocks> {
 public:
  explicit ToyLinearModel(const ModelContext& context) : context_(context) {
    if (context.is_first_stage()) scale_ = register_parameter("scale", at::linspace(0.5, 1.5, kWidth));
    for (int b = context.first_block; b < context.last_block; ++b) {
      auto block = register_module("block" + std::to_string(b), std::make_shared<ColumnParallelLinear>(
                                                                    LinearOptions{kWidth, kWidth}, TensorParallel{}));
      const at::NoGradGuard no_grad;
      block->weight.copy_(at::arange(kWidth * kWidth, at::kFloat).mul(0.7 * (b + 1)).sin().view({kWidth, kWidth}));
      blocks_.push_back(block);
    }
  }
  void log_weight_arrivals() {
    torch::autograd::impl::set_post_acc_grad_hooks(blocks_.front()->weight,
                                                   std::make_unique<WeightArrival>(context_.chunk_index));
  }

  StageOutput forward(const StageInput& input) override {
    const std::string pass =
        std::to_string(context_.chunk_index) + "." + std::to_string(micro_batch_of(input.input_ids));
    events().push_back("F" + pass);
    at::Tensor hidden =
        context_.is_first_stage() ? input.input_ids.to(at::kFloat).unsqueeze(-1).mul(0.1) * scale_ : input.hidden_in;
    for (const auto& block : blocks_) hidden = at::tanh(block->forward(hidden));
    hidden.register_hook([pass](const at::Tensor&) { events().push_back("B" + pass); });
    StageOutput output;
    if (context_.is_last_stage())
      output.loss = hidden.pow(2).mean();
    else
      output.hidden_out = hidden;
    return output;
  }
  int64_t total_parameters() const override { return kBlocks * kWidth * kWidth + kWidth; }

 private:
  ModelContext context_;
  at::Tensor scale_;
  std::vector<std::shared_ptr<ColumnParallelLinear>> blocks_;
};

const triax_model_vtable& toy_vtable() { return *detail::ModelAdapter<ToyLinearModel>::vtable(); }

triax_engine_context engine_context(int rank, const HostServices& host, bool sends_buffered = false) {
  triax_engine_context context{};
  context.struct_size = sizeof(context);
  context.pp_rank = rank;
  context.pp_size = 2;
  context.parallelism_yaml = "{}";
  context.host = host.c_host();
  context.micro_batches = kMicroBatches;
  context.places_chunks = 1;
  context.sends_buffered = sends_buffered ? 1 : 0;
  return context;
}

// Runs `engine_name` at pp 2 over this rank's chunks and checks it against the whole model; with
// `sends_buffered` the host says its sends return at once, and the engine sends each tensor as made.
void expect_engine_matches_the_whole_model(const std::string& engine_name, plugins::ZeroBubbleLayout layout,
                                           bool sends_buffered = false) {
  MpiCommunicator& comm = testing::communicator({1, 2, 1});
  HostServices host(comm);
  const int rank = comm.rank(TRIAX_GROUP_PP);
  ModelInstance whole(toy_vtable(), "toy", "{}", toy_context(0, 1, 0, kBlocks, 0, 1, 0, host.c_host()));
  const auto [reference_loss, reference_grads] = testing::run_whole_model(whole, kMicroBatches);
  events().clear();

  EngineInstance engine(testing::test_plugin_registry().engine(engine_name), engine_name,
                        engine_context(rank, host, sends_buffered));
  ASSERT_EQ(engine.model_chunks(), layout.chunks);
  ASSERT_EQ(engine.chunk_placement(), layout.placement);
  const int blocks_per_stage = kBlocks / (2 * layout.chunks);
  std::vector<std::unique_ptr<ModelInstance>> chunks;
  std::vector<triax_model_ref> refs;
  for (int c = 0; c < layout.chunks; ++c) {
    const int stage = virtual_stage_of(layout.placement, 2, rank, c), first = stage * blocks_per_stage;
    chunks.push_back(std::make_unique<ModelInstance>(
        toy_vtable(), "toy", "{}",
        toy_context(rank, 2, first, first + blocks_per_stage, c, layout.chunks, stage, host.c_host())));
    refs.push_back(chunks.back()->ref());
  }
  Hooks hooks;
  const triax_step_request request = testing::chunk_step_request(refs, kMicroBatches, hooks);
  for (int c = 0; c < layout.chunks; ++c)
    reinterpret_cast<detail::ModelBox<ToyLinearModel>*>(refs[c].model)->model->log_weight_arrivals();
  const EngineInstance::Result result = engine.train_step(request);

  if (rank == 0 ? layout.placement == TRIAX_CHUNKS_V : layout.placement != TRIAX_CHUNKS_V) {  // the last stage
    ASSERT_TRUE(result.loss.defined());
    EXPECT_TRUE(at::allclose(result.loss, reference_loss, 1e-6, 1e-7)) << result.loss << " vs " << reference_loss;
  }
  for (const auto& chunk : chunks)
    for (const NamedParameter& p : chunk->parameters()) {
      ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
      EXPECT_TRUE(at::allclose(p.tensor.grad(), reference_grads.at(p.name), 1e-6, 1e-7))
          << engine_name << " " << p.name;
    }
  // The passes ran in the schedule's order, each W apart from its B.
  const auto passes = plugins::zero_bubble_passes({2, layout.chunks, kMicroBatches}, layout)[rank];
  std::vector<std::string> expected;
  for (const plugins::Pass& p : passes)
    expected.push_back(std::string(p.forward()                                  ? "F"
                                   : p.kind == plugins::PassKind::BackwardInput ? "B"
                                                                                : "W") +
                       std::to_string(p.chunk) + "." + std::to_string(p.micro_batch));
  EXPECT_EQ(events(), expected) << engine_name << ", rank " << rank;
  std::set<std::pair<int, int>> seen(hooks.backwards.begin(), hooks.backwards.end());
  EXPECT_EQ(seen.size(), static_cast<size_t>(layout.chunks * kMicroBatches));
  EXPECT_EQ(hooks.backwards.size(), seen.size());
  std::vector<int> next_index(layout.chunks, 0);
  for (const auto& [chunk, index] : hooks.backwards) EXPECT_EQ(index, next_index[chunk]++) << "chunk " << chunk;
  EXPECT_EQ(result.peak_live_micro_batches, plugins::peak_in_flight(passes)) << engine_name << ", rank " << rank;
}

TEST(ZeroBubblePipeline, ZbVMatchesTheWholeModel) {
  TRIAX_REQUIRE_WORLD_SIZE(2);
  expect_engine_matches_the_whole_model("zb_v", plugins::zb_v_layout(2));
}

TEST(ZeroBubblePipeline, ZbH1MatchesTheWholeModel) {
  TRIAX_REQUIRE_WORLD_SIZE(2);
  expect_engine_matches_the_whole_model("zb_h1", plugins::zb_h1_layout(2));
}

TEST(ZeroBubblePipeline, BothWithTheirSendsAsSoonAsMadeMatchTheWholeModel) {
  TRIAX_REQUIRE_WORLD_SIZE(2);
  expect_engine_matches_the_whole_model("zb_v", plugins::zb_v_layout(2), /*sends_buffered=*/true);
  expect_engine_matches_the_whole_model("zb_h1", plugins::zb_h1_layout(2), /*sends_buffered=*/true);
}

// Every forward, then every B, and never a W: the step must fail, naming the engine.
class ForgetsWeights final : public Engine {
 public:
  explicit ForgetsWeights(EngineContext context) : context_(std::move(context)) {}
  static std::unique_ptr<ForgetsWeights> create(const EngineContext& context) {
    return std::make_unique<ForgetsWeights>(context);
  }
  StepResult train_step(const StepRequest& request) override {
    PipelineStage stage(context_, request, {TRIAX_CHUNKS_INTERLEAVED, /*split_backward=*/true});
    for (int i = 0; i < request.micro_batches(); ++i) stage.forward(i);
    for (int i = 0; i < request.micro_batches(); ++i) stage.backward_input(i);
    return stage.finish();
  }

 private:
  EngineContext context_;
};

TEST(ZeroBubblePipeline, AStepWithAWeightGradientNeverComputedFailsNamingTheEngine) {
  TRIAX_REQUIRE_WORLD_SIZE(2);
  MpiCommunicator& comm = testing::communicator({1, 2, 1});
  HostServices host(comm);
  const int rank = comm.rank(TRIAX_GROUP_PP);
  EngineInstance engine(*detail::EngineAdapter<ForgetsWeights>::vtable(), "forgets_w", engine_context(rank, host));
  ModelInstance chunk(toy_vtable(), "toy", "{}",
                      toy_context(rank, 2, 2 * rank, 2 * rank + 2, 0, 1, rank, host.c_host()));
  triax_step_request request{};
  request.struct_size = sizeof(request);
  request.model = chunk.ref();
  request.micro_batches = kMicroBatches;
  request.batches = {nullptr, &Feed::next};
  try {
    engine.train_step(request);
    FAIL() << "the step ended without its W";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("engine plugin 'forgets_w'"), std::string::npos) << message;
    EXPECT_NE(message.find("weight gradients of 4 (chunk, micro-batch) pairs never computed"), std::string::npos)
        << message;
  }
}

TEST(ZeroBubblePipeline, AVNeedsAHostThatPlacesChunks) {
  MpiCommunicator& comm = testing::communicator({1, testing::world_size(), 1});
  HostServices host(comm);
  triax_engine_context older = engine_context(0, host);
  older.struct_size = offsetof(triax_engine_context, places_chunks);
  try {
    EngineInstance engine(testing::test_plugin_registry().engine("zb_v"), "zb_v", older);
    FAIL() << "zb_v accepted a host that places chunks interleaved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a host of ABI 1.13"), std::string::npos) << e.what();
  }
  // An engine table of the 1.11 size: the host reads no placement, and places chunks interleaved.
  triax_engine_vtable table = testing::test_plugin_registry().engine("zb_h1");
  table.struct_size = offsetof(triax_engine_vtable, chunk_placement);
  EXPECT_EQ(EngineInstance(table, "zb_h1", engine_context(0, host)).chunk_placement(), TRIAX_CHUNKS_INTERLEAVED);
}

}  // namespace
}  // namespace triax::zero_bubble_pipeline_test
