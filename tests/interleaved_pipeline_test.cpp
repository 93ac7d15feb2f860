// The interleaved_1f1b engine and the SDK's PipelineStage with two model chunks per rank, over 2
// real ranks (mpi backend). A toy model of 4 blocks, whose stage boundary carries three tensors
// (the hidden state, an fp32 running sum beside it, an integer count of the blocks passed), is
// cut into 4 virtual stages: rank 0 holds blocks 0 and 2, rank 1 blocks 1 and 3, and the last
// rank feeds rank 0's second chunk. The loss and every gradient must equal the whole model's
// in one process; the host's after_chunk_backward hook must see each (chunk, micro-batch) once,
// in micro-batch order per chunk; the measured peak of live passes must be the schedule's.
#include <ATen/ATen.h>

#include <cstddef>
#include <map>
#include <set>

#include "multi_rank_environment.hpp"
#include "test_plugin_registry.hpp"
#include "toy_pipeline_support.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/plugin.hpp"

namespace triax {
namespace {

constexpr int kBlocks = 4;
constexpr int kMicroBatches = 4;
constexpr int64_t kWidth = 3;

// Block b: hidden <- tanh(hidden W_b), sum <- sum + hidden, passed <- passed + 1. The first
// virtual stage makes the hidden state from the token ids, the last takes mean(hidden * sum).
class ToyChunkModel : public testing::ToyModel<ToyChunkModel, kBlocks> {
 public:
  explicit ToyChunkModel(const ModelContext& context) : context_(context) {
    for (int b = context.first_block; b < context.last_block; ++b)
      weights_.push_back(
          register_parameter("block" + std::to_string(b),
                             at::arange(kWidth * kWidth, at::kFloat).mul(0.7 * (b + 1)).sin().view({kWidth, kWidth})));
  }

  StageOutput forward(const StageInput& input) override {
    at::Tensor hidden, sum, passed;
    if (context_.is_first_stage()) {
      hidden = input.input_ids.to(at::kFloat).unsqueeze(-1).mul(0.1).expand({-1, -1, kWidth});
      sum = at::zeros_like(hidden);
      passed = at::zeros({1}, at::kLong);
    } else {
      const std::vector<at::Tensor> boundary = input.boundary();
      if (boundary.size() != 3 || !boundary[1].requires_grad() || boundary[2].requires_grad())
        throw Error("toy: expected hidden, sum (both differentiable) and an integer count");
      hidden = boundary[0], sum = boundary[1], passed = boundary[2];
    }
    for (const at::Tensor& w : weights_) {
      hidden = at::tanh(hidden.matmul(w));
      sum = sum + hidden;
      passed = passed + 1;
    }
    StageOutput output;
    if (!context_.is_last_stage()) {
      output.boundary_out = {hidden, sum, passed};
      return output;
    }
    if (passed.item<int64_t>() != kBlocks)
      throw Error("toy: the last stage saw " + std::to_string(passed.item<int64_t>()) + " blocks");
    output.loss = (hidden * sum).mean();
    return output;
  }
  int64_t total_parameters() const override { return kBlocks * kWidth * kWidth; }

 private:
  ModelContext context_;
  std::vector<at::Tensor> weights_;
};

const triax_model_vtable& toy_vtable() { return *detail::ModelAdapter<ToyChunkModel>::vtable(); }

using testing::Hooks;
using testing::toy_context;

TEST(InterleavedPipeline, TwoChunksPerRankMatchTheWholeModel) {
  TRIAX_REQUIRE_WORLD_SIZE(2);
  MpiCommunicator& comm = testing::communicator({1, 2, 1});
  HostServices host(comm);
  const int rank = comm.rank(TRIAX_GROUP_PP);

  // The whole model in this process.
  ModelInstance whole(toy_vtable(), "toy", "{}", toy_context(0, 1, 0, kBlocks, 0, 1, host.c_host()));
  const auto [reference_loss, reference_grads] = testing::run_whole_model(whole, kMicroBatches);

  // This rank's two chunks: virtual stages rank and 2 + rank, one block each.
  const std::string parallelism = "pp_chunks_per_rank: 2";
  triax_engine_context engine_context{};
  engine_context.struct_size = sizeof(engine_context);
  engine_context.pp_rank = rank;
  engine_context.pp_size = 2;
  engine_context.parallelism_yaml = parallelism.c_str();
  engine_context.host = host.c_host();
  engine_context.micro_batches = kMicroBatches;
  EngineInstance engine(testing::test_plugin_registry().engine("interleaved_1f1b"), "interleaved_1f1b", engine_context);
  ASSERT_EQ(engine.model_chunks(), 2);
  std::vector<std::unique_ptr<ModelInstance>> chunks;
  std::vector<triax_model_ref> refs;
  for (int c = 0; c < 2; ++c) {
    const int block = c * 2 + rank;
    chunks.push_back(std::make_unique<ModelInstance>(toy_vtable(), "toy", "{}",
                                                     toy_context(rank, 2, block, block + 1, c, 2, host.c_host())));
    refs.push_back(chunks.back()->ref());
  }
  Hooks hooks;
  const triax_step_request request = testing::chunk_step_request(refs, kMicroBatches, hooks);
  const EngineInstance::Result result = engine.train_step(request);

  if (rank == 1) {  // virtual stage 3, the last, is chunk 1 of rank 1
    ASSERT_TRUE(result.loss.defined());
    EXPECT_TRUE(at::allclose(result.loss, reference_loss, 1e-6, 1e-7)) << result.loss << " vs " << reference_loss;
  } else {
    EXPECT_FALSE(result.loss.defined());
  }
  for (const auto& chunk : chunks)
    for (const NamedParameter& p : chunk->parameters()) {
      ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
      EXPECT_TRUE(at::allclose(p.tensor.grad(), reference_grads.at(p.name), 1e-6, 1e-7))
          << p.name << ": " << p.tensor.grad() << " vs " << reference_grads.at(p.name);
    }
  // Every (chunk, micro-batch) once, micro-batches in order within a chunk.
  std::set<std::pair<int, int>> seen(hooks.backwards.begin(), hooks.backwards.end());
  EXPECT_EQ(seen.size(), hooks.backwards.size());
  EXPECT_EQ(hooks.backwards.size(), static_cast<size_t>(2 * kMicroBatches));
  std::vector<int> next_index(2, 0);
  for (const auto& [chunk, index] : hooks.backwards) EXPECT_EQ(index, next_index[chunk]++) << "chunk " << chunk;
  // Warm-up of (pp - rank - 1) * 2 + (chunks - 1) * pp forwards, then one more before a backward.
  EXPECT_EQ(result.peak_live_micro_batches, rank == 0 ? 5 : 3);
}

// Plugins and hosts of ABI 1.2 or older know nothing of chunks: one chunk, after_backward.
TEST(ModelChunksAbi, OlderEnginesAndHostsMeanOneChunk) {
  MpiCommunicator& comm = testing::communicator({1, testing::world_size(), 1});
  HostServices host(comm);
  const std::string parallelism = "pp_chunks_per_rank: 2";
  triax_engine_context engine_context{};
  engine_context.struct_size = sizeof(engine_context);
  engine_context.pp_size = 2;
  engine_context.parallelism_yaml = parallelism.c_str();
  engine_context.host = host.c_host();
  engine_context.micro_batches = kMicroBatches;
  // The same engine behind a table of the 1.2 size: the host does not read model_chunks.
  triax_engine_vtable older = testing::test_plugin_registry().engine("interleaved_1f1b");
  older.struct_size = offsetof(triax_engine_vtable, model_chunks);
  EXPECT_EQ(EngineInstance(older, "interleaved_1f1b", engine_context).model_chunks(), 1);

  // A request of the 1.2 size: one model, and after_backward(0, i) calls its after_backward.
  struct Calls {
    std::vector<int> indices;
    static triax_status after_backward(void* self, int32_t index, triax_error*) {
      static_cast<Calls*>(self)->indices.push_back(index);
      return TRIAX_OK;
    }
  } calls;
  triax_model_ref ref{&toy_vtable(), nullptr};
  triax_step_request request{};
  request.struct_size = offsetof(triax_step_request, model_count);
  request.model = ref;
  request.micro_batches = 2;
  request.hooks_self = &calls;
  request.after_backward = &Calls::after_backward;
  const StepRequest older_request(request);
  EXPECT_EQ(older_request.chunk_count(), 1);
  older_request.after_backward(0, 1);
  older_request.after_backward(0);
  EXPECT_EQ(calls.indices, (std::vector<int>{1, 0}));
  EXPECT_THROW(older_request.after_backward(1, 0), Error);

  // A model context of the 1.2 size: the virtual stages are the pipeline ranks.
  triax_model_context context = toy_context(1, 2, 0, 1, 0, 1, host.c_host());
  context.struct_size = offsetof(triax_model_context, chunk_index);
  const ModelContext seen = ModelContext::from_c(context);
  EXPECT_EQ(seen.chunk_count, 1);
  EXPECT_EQ(seen.virtual_stage, 1);
  EXPECT_TRUE(seen.is_last_stage());
  EXPECT_FALSE(seen.is_first_stage());
}

}  // namespace
}  // namespace triax
