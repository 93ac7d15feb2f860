// Data parallelism against single-rank references, with real processes over the mpi backend (run
// at 2 and at 4 ranks): bucketed gradient averaging (all-reduce and ZeRO reduce-scatter, also
// overlapping the backward of one or several model chunks), the global gradient norm with
// tp-replicated and tied parameters counted once, zero1_adamw against adamw on the mean gradient,
// and whole training runs against one rank with the same global batch.
//
// Every rank computes every other rank's inputs from formulas, so each can build the reference
// (the mean gradient, the whole model's gradient) locally without communicating.
#include <ATen/ATen.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "multi_rank_environment.hpp"
#include "test_plugin_registry.hpp"
#include "triax/config/train_config.hpp"
#include "triax/parallel/data_parallel_gradients.hpp"
#include "gradients/gradient_accumulator.hpp"
#include "triax/parallel/gradient_norm.hpp"
#include "triax/parallel/replica_ownership.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/core/trainer.hpp"
#include "triax/tensor_handle.hpp"
#include "triax/zero_partition.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;
using testing::communicator;
using testing::world_size;

// Uneven sizes on purpose: at dp 2 and 4 most chunks need padding, {2} leaves ranks 2 and 3 of
// 4 an empty shard, {4, 4} divides evenly.
const std::vector<std::vector<int64_t>> kShapes = {{7}, {3, 5}, {1}, {13}, {4, 4}, {2}};

std::vector<NamedParameter> make_parameters(const std::vector<std::vector<int64_t>>& shapes,
                                            at::ScalarType dtype = at::kFloat, uint32_t flags = 0) {
  std::vector<NamedParameter> params;
  for (size_t k = 0; k < shapes.size(); ++k) {
    at::Tensor t = at::zeros(shapes[k], at::dtype(dtype));
    params.push_back({"p" + std::to_string(k), t, ParameterSpec::replicated(t, flags)});
  }
  return params;
}

// The gradient that `rank` contributes for parameter k at `step`: distinct per rank, parameter
// and step, known to every rank.
at::Tensor rank_gradient(int rank, size_t k, const std::vector<int64_t>& shape, int step = 0) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  return at::arange(numel, at::kDouble)
      .mul(0.37 * (rank + 1) + 0.11 * step)
      .add(static_cast<double>(k) + 0.5 * step)
      .sin()
      .mul(1.0 + 0.3 * rank)
      .to(at::kFloat)
      .view(shape);
}

at::Tensor mean_gradient(int dp, size_t k, const std::vector<int64_t>& shape, int step = 0) {
  at::Tensor sum = at::zeros(shape, at::kDouble);
  for (int r = 0; r < dp; ++r) sum += rank_gradient(r, k, shape, step).to(at::kDouble);
  return (sum / dp).to(at::kFloat);
}

std::vector<bool> all_counted(size_t n) { return std::vector<bool>(n, true); }

constexpr int64_t kOneParameterPerBucket = 1;  // bytes: every parameter overflows it alone
constexpr int64_t kOneBucket = 1 << 20;

TEST(DataParallelGradients, AllReduceGivesEveryRankTheMeanWithSmallAndLargeBuckets) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const int rank = comm.rank(TRIAX_GROUP_DP);
  for (int64_t cap : {kOneParameterPerBucket, int64_t{64}, kOneBucket}) {
    auto params = make_parameters(kShapes);
    DataParallelGradients reduction(params, TRIAX_GRADIENTS_WHOLE, cap, {rank, dp}, all_counted(params.size()));
    const size_t expected_buckets = cap == kOneParameterPerBucket ? kShapes.size() : cap == kOneBucket ? 1 : 0;
    if (expected_buckets > 0) {
      EXPECT_EQ(reduction.bucket_members().size(), expected_buckets) << "bucket cap " << cap << " bytes";
    }
    std::vector<at::Tensor> grads;
    for (size_t k = 0; k < kShapes.size(); ++k) grads.push_back(rank_gradient(rank, k, kShapes[k]));
    reduction.reduce_over_data_parallel(grads, comm);
    for (size_t k = 0; k < kShapes.size(); ++k) {
      const at::Tensor& got = reduction.for_optimizer()[k];
      EXPECT_TRUE(got.is_same(grads[k])) << "averaged in place";
      EXPECT_TRUE(at::allclose(got, mean_gradient(dp, k, kShapes[k]), 1e-6, 1e-7))
          << "parameter " << k << ", bucket cap " << cap << " bytes: " << got << " vs "
          << mean_gradient(dp, k, kShapes[k]);
    }
  }
}

TEST(DataParallelGradients, ReduceScatterGivesEachRankExactlyItsChunkOfTheMean) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const int rank = comm.rank(TRIAX_GROUP_DP);
  for (int64_t cap : {kOneParameterPerBucket, int64_t{64}, kOneBucket}) {
    auto params = make_parameters(kShapes);
    DataParallelGradients reduction(params, TRIAX_GRADIENTS_DP_SHARDED, cap, {rank, dp}, all_counted(params.size()));
    std::vector<at::Tensor> grads;
    for (size_t k = 0; k < kShapes.size(); ++k) grads.push_back(rank_gradient(rank, k, kShapes[k]));
    reduction.reduce_over_data_parallel(grads, comm);
    for (size_t k = 0; k < kShapes.size(); ++k) {
      const ZeroShard shard = zero_shard(params[k].tensor.numel(), rank, dp);
      const at::Tensor& got = reduction.for_optimizer()[k];
      ASSERT_EQ(got.dim(), 1);
      ASSERT_EQ(got.numel(), shard.length) << "parameter " << k;
      at::Tensor expected = mean_gradient(dp, k, kShapes[k]).reshape({-1}).narrow(0, shard.offset, shard.length);
      EXPECT_TRUE(at::allclose(got, expected, 1e-6, 1e-7))
          << "parameter " << k << ", rank " << rank << ", bucket cap " << cap << ": " << got << " vs " << expected;
    }
  }
}

// Micro-batch i's loss: sum over the used parameters of <p_k, rank_gradient(rank, k, i)>, built
// in parameter order so that backward accumulates the last parameters' gradients first.
at::Tensor micro_batch_loss(const std::vector<NamedParameter>& params, int rank, int micro_batch, size_t unused) {
  at::Tensor loss = at::zeros({}, at::kFloat);
  for (size_t k = 0; k < params.size(); ++k)
    if (k != unused)
      loss = loss + (params[k].tensor * rank_gradient(rank, k, params[k].tensor.sizes().vec(), micro_batch)).sum();
  return loss;
}

// Three micro-batches through autograd and the accumulator, reduced with or without overlap.
struct OverlapRun {
  std::vector<NamedParameter> params = make_parameters(kShapes);
  GradientAccumulator accumulator{params, true};
  DataParallelGradients reduction;
  int64_t started_before_backward_returned = 0;

  OverlapRun(triax_gradient_sharding sharding, int64_t cap, int rank, int dp)
      : reduction(params, sharding, cap, {rank, dp}, all_counted(kShapes.size())) {
    for (NamedParameter& p : params) p.tensor.requires_grad_(true);
  }
  void overlap(const std::vector<bool>& held, Communicator& comm) {
    reduction.overlap_with_backward([this](size_t k) { return accumulator.final_gradient(k); }, held, comm);
  }
  void step(int rank, size_t unused, Communicator& comm) {
    constexpr int kMicroBatches = 3;
    accumulator.zero();
    reduction.begin_step(kMicroBatches);
    for (int i = 0; i < kMicroBatches; ++i) {
      micro_batch_loss(params, rank, i, unused).backward();
      if (i == kMicroBatches - 1) started_before_backward_returned = reduction.buckets_started_in_backward();
      accumulator.after_backward();
      reduction.after_backward();
    }
    reduction.reduce_over_data_parallel(accumulator.gradients(), comm);
  }
};

TEST(DataParallelGradients, OverlappedReductionStartsBucketsDuringTheLastBackwardWithTheSameResult) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const int rank = comm.rank(TRIAX_GROUP_DP);
  const size_t unused = 1;  // gets no gradient: its bucket, and every later one, start after the backward
  for (triax_gradient_sharding sharding : {TRIAX_GRADIENTS_WHOLE, TRIAX_GRADIENTS_DP_SHARDED}) {
    for (int64_t cap : {kOneParameterPerBucket, int64_t{64}}) {
      for (bool hold_first : {false, true}) {  // parameter 0 summed after the backward, as a tied one
        const std::string what = "sharding " + std::to_string(sharding) + ", bucket cap " + std::to_string(cap) +
                                 (hold_first ? ", parameter 0 held" : "");
        OverlapRun overlapped(sharding, cap, rank, dp), reference(sharding, cap, rank, dp);
        std::vector<bool> held(kShapes.size(), false);
        held[0] = hold_first;
        overlapped.overlap(held, comm);
        EXPECT_NE(overlapped.reduction.describe().find("overlapping"), std::string::npos) << what;
        overlapped.step(rank, unused, comm);
        reference.step(rank, unused, comm);
        EXPECT_EQ(reference.started_before_backward_returned, 0) << what;
        if (cap == kOneParameterPerBucket) {  // buckets 5, 4, 3, 2 are complete before parameter 1's
          EXPECT_EQ(overlapped.started_before_backward_returned, 4) << what;
        } else {
          EXPECT_GT(overlapped.started_before_backward_returned, 0) << what;
        }
        for (size_t k = 0; k < kShapes.size(); ++k) {
          const at::Tensor& got = overlapped.reduction.for_optimizer()[k];
          EXPECT_TRUE(at::equal(got, reference.reduction.for_optimizer()[k])) << what << ", parameter " << k;
          at::Tensor expected = at::zeros(kShapes[k], at::kFloat);
          if (k != unused)
            for (int i = 0; i < 3; ++i) expected += mean_gradient(dp, k, kShapes[k], i);
          if (sharding == TRIAX_GRADIENTS_DP_SHARDED) {
            const ZeroShard shard = zero_shard(expected.numel(), rank, dp);
            expected = expected.reshape({-1}).narrow(0, shard.offset, shard.length);
          }
          EXPECT_TRUE(at::allclose(got, expected, 1e-5, 1e-6)) << what << ", parameter " << k;
        }
      }
    }
  }
}

// Two model chunks (parameters 0-2 in chunk 0, 3-5 in chunk 1) backpropagated in the order of
// pipeline rank 0 of interleaved 1F1B at pp 2: chunk 1's last micro-batch comes before chunk 0's,
// so chunk 1's buckets (the first: buckets follow the parameters backwards) start first.
TEST(DataParallelGradients, OverlapWithModelChunksStartsEachChunkAfterItsLastBackward) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const int rank = comm.rank(TRIAX_GROUP_DP);
  const std::vector<std::pair<int, int>> order = {{1, 0}, {1, 1}, {0, 0}, {0, 1}, {1, 2}, {1, 3}, {0, 2}, {0, 3}};
  for (triax_gradient_sharding sharding : {TRIAX_GRADIENTS_WHOLE, TRIAX_GRADIENTS_DP_SHARDED}) {
    std::vector<at::Tensor> reduced[2];
    for (bool overlap : {false, true}) {
      auto params = make_parameters(kShapes);
      for (NamedParameter& p : params) p.tensor.requires_grad_(true);
      GradientAccumulator accumulator(params, true);
      DataParallelGradients reduction(params, sharding, kOneParameterPerBucket, {rank, dp}, all_counted(params.size()));
      reduction.set_parameter_chunks({0, 0, 0, 1, 1, 1}, 2);
      if (overlap)
        reduction.overlap_with_backward([&](size_t k) { return accumulator.final_gradient(k); },
                                        std::vector<bool>(params.size(), false), comm);
      accumulator.zero();
      reduction.begin_step(4);
      for (const auto& [chunk, micro_batch] : order) {
        at::Tensor loss = at::zeros({}, at::kFloat);
        for (size_t k = 3 * static_cast<size_t>(chunk); k < 3 * static_cast<size_t>(chunk) + 3; ++k)
          loss = loss + (params[k].tensor * rank_gradient(rank, k, kShapes[k], micro_batch)).sum();
        loss.backward();
        if (chunk == 1 && micro_batch == 3) {
          EXPECT_EQ(reduction.buckets_started_in_backward(), overlap ? 3 : 0);
        }
        accumulator.after_backward(3 * chunk, 3 * chunk + 3);
        reduction.after_backward(chunk);
      }
      EXPECT_EQ(reduction.buckets_started_in_backward(), overlap ? 6 : 0);
      reduction.reduce_over_data_parallel(accumulator.gradients(), comm);
      for (const at::Tensor& g : reduction.for_optimizer()) reduced[overlap].push_back(g.clone());
    }
    for (size_t k = 0; k < kShapes.size(); ++k) {
      EXPECT_TRUE(at::equal(reduced[1][k], reduced[0][k])) << "sharding " << sharding << ", parameter " << k;
      at::Tensor expected = at::zeros(kShapes[k], at::kFloat);
      for (int i = 0; i < 4; ++i) expected += mean_gradient(dp, k, kShapes[k], i);
      if (sharding == TRIAX_GRADIENTS_DP_SHARDED) {
        const ZeroShard shard = zero_shard(expected.numel(), rank, dp);
        expected = expected.reshape({-1}).narrow(0, shard.offset, shard.length);
      }
      EXPECT_TRUE(at::allclose(reduced[1][k], expected, 1e-5, 1e-6)) << "sharding " << sharding << ", parameter " << k;
    }
  }
}

// The norm of the one logical gradient of the model, computed on one rank: `pieces` are its
// distinct parts (each tp shard, each stage's own parameters, one copy of each shared one).
double reference_norm(const std::vector<at::Tensor>& pieces) {
  double squares = 0;
  for (const at::Tensor& piece : pieces) squares += piece.to(at::kDouble).pow(2).sum().item<double>();
  return std::sqrt(squares);
}

void expect_norm_and_clip(DataParallelGradients& reduction, Communicator& comm, double expected,
                          const std::string& what) {
  at::Tensor norm = reduction.clip(std::nullopt, comm);
  EXPECT_NEAR(norm.item<double>(), expected, 1e-5 * expected) << what;
  // Clipping to half the norm halves every gradient: measured again, the norm is half.
  reduction.clip(expected / 2, comm);
  EXPECT_NEAR(reduction.clip(std::nullopt, comm).item<double>(), expected / 2, 1e-5 * expected) << what;
}

// dp × tp = world: a tp-sharded parameter (each tp rank holds half of it) and a tp-replicated one
// (identical on both tp ranks, counted on tp rank 0 only).
TEST(GlobalGradientNorm, TpReplicatedParametersCountOnce) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "needs an even world";
  const int dp = world_size() / 2;
  MpiCommunicator& comm = communicator({dp, 1, 2});
  const int dp_rank = comm.rank(TRIAX_GROUP_DP), tp_rank = comm.rank(TRIAX_GROUP_TP);
  const std::vector<int64_t> half = {5}, replicated = {3};
  for (triax_gradient_sharding sharding : {TRIAX_GRADIENTS_WHOLE, TRIAX_GRADIENTS_DP_SHARDED}) {
    std::vector<NamedParameter> params = make_parameters({half, replicated});
    params[0].spec = ParameterSpec::sharded({10}, 0, 5 * tp_rank);
    params[1].spec.flags = TRIAX_PARAM_TP_REPLICATED;
    const ReplicaOwnership ownership({dp_rank, dp, 1, tp_rank}, [](const std::string&) { return true; });
    DataParallelGradients reduction(params, sharding, kOneBucket, {dp_rank, dp},
                                    ownership.counted_in_norm(params, sharding == TRIAX_GRADIENTS_DP_SHARDED));
    // The tp-sharded gradient differs per tp rank (parameter index 10 + tp); the replicated one not.
    reduction.reduce_over_data_parallel(
        {rank_gradient(dp_rank, 10 + tp_rank, half), rank_gradient(dp_rank, 20, replicated)}, comm);
    const double expected =
        reference_norm({mean_gradient(dp, 10, half), mean_gradient(dp, 11, half), mean_gradient(dp, 20, replicated)});
    expect_norm_and_clip(reduction, comm, expected, "sharding " + std::to_string(sharding));
  }
}

// dp × pp = world: each stage has its own parameter, and both hold a copy of a tied one (whose
// copies' gradients the host has summed before), counted on the lowest stage only.
TEST(GlobalGradientNorm, TiedCopiesCountOnlyOnTheLowestStage) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "needs an even world";
  const int dp = world_size() / 2;
  MpiCommunicator& comm = communicator({dp, 2, 1});
  const int dp_rank = comm.rank(TRIAX_GROUP_DP), pp_rank = comm.rank(TRIAX_GROUP_PP);
  const std::vector<int64_t> own = {4}, tied = {6};
  for (triax_gradient_sharding sharding : {TRIAX_GRADIENTS_WHOLE, TRIAX_GRADIENTS_DP_SHARDED}) {
    std::vector<NamedParameter> params = make_parameters({own, tied});
    params[1].spec.flags = TRIAX_PARAM_TIED;
    params[1].spec.tied_key = "model.embed_tokens.weight";
    const auto lowest_stage = [&](const std::string& key) {
      EXPECT_EQ(key, "model.embed_tokens.weight");
      return pp_rank == 0;
    };
    const ReplicaOwnership ownership({dp_rank, dp}, lowest_stage);
    DataParallelGradients reduction(params, sharding, kOneParameterPerBucket, {dp_rank, dp},
                                    ownership.counted_in_norm(params, sharding == TRIAX_GRADIENTS_DP_SHARDED));
    reduction.reduce_over_data_parallel({rank_gradient(dp_rank, 30 + pp_rank, own), rank_gradient(dp_rank, 40, tied)},
                                        comm);
    const double expected =
        reference_norm({mean_gradient(dp, 30, own), mean_gradient(dp, 31, own), mean_gradient(dp, 40, tied)});
    expect_norm_and_clip(reduction, comm, expected, "sharding " + std::to_string(sharding));
  }
}

std::unique_ptr<OptimizerInstance> make_optimizer(const std::string& name, const std::vector<NamedParameter>& params,
                                                  int dp_rank, int dp_size, const HostServices& host) {
  static const std::string yaml =
      "optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95, adam_eps: 1.0e-8}\n";
  triax_optimizer_context context{};
  context.struct_size = sizeof(context);
  context.dp_rank = dp_rank;
  context.dp_size = dp_size;
  context.optimizer_yaml = yaml.c_str();
  context.host = host.c_host();
  std::vector<triax_optimizer_param> c_params;
  for (size_t k = 0; k < params.size(); ++k)  // every other parameter decays
    c_params.push_back({params[k].name.c_str(), borrow_handle(params[k].tensor), k % 2 == 0 ? 0.1 : 0.0, 0});
  return std::make_unique<OptimizerInstance>(testing::test_plugin_registry().optimizer(name), name, context, c_params);
}

// Every dp rank's copy of `tensor` is bit-identical.
void expect_identical_over_dp(Communicator& comm, const at::Tensor& tensor, const std::string& what) {
  const int dp = comm.size(TRIAX_GROUP_DP);
  at::Tensor all = at::empty({dp * tensor.numel()}, tensor.options());
  comm.all_gather(TRIAX_GROUP_DP, all, tensor.reshape({-1}).contiguous());
  at::Tensor rows = all.view({dp, tensor.numel()});
  for (int r = 1; r < dp; ++r) EXPECT_TRUE(at::equal(rows[r], rows[0])) << what << " differs on dp rank " << r;
}

int64_t sum_over_dp(Communicator& comm, int64_t value) {
  at::Tensor t = at::full({1}, value, at::kLong);
  comm.all_reduce(TRIAX_GROUP_DP, t, TRIAX_REDUCE_SUM);
  return t.item<int64_t>();
}

// zero1_adamw fed reduce-scattered shards vs adamw (on this rank alone) fed the mean gradient.
void check_zero1_against_adamw(const std::vector<std::vector<int64_t>>& shapes, at::ScalarType dtype) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const int rank = comm.rank(TRIAX_GROUP_DP);
  HostServices host(comm);
  SingleProcessCommunicator alone;
  HostServices alone_host(alone);

  auto sharded = make_parameters(shapes, dtype), whole = make_parameters(shapes, dtype);
  for (size_t k = 0; k < shapes.size(); ++k) {
    at::Tensor start = rank_gradient(99, k, shapes[k]).to(dtype);  // the same start on every rank
    sharded[k].tensor.copy_(start);
    whole[k].tensor.copy_(start);
  }
  auto zero1 = make_optimizer("zero1_adamw", sharded, rank, dp, host);
  auto adamw = make_optimizer("adamw", whole, 0, 1, alone_host);
  ASSERT_EQ(zero1->gradient_sharding(), TRIAX_GRADIENTS_DP_SHARDED);
  DataParallelGradients reduction(sharded, zero1->gradient_sharding(), 64, {rank, dp}, all_counted(shapes.size()));

  for (int step = 1; step <= 5; ++step) {
    std::vector<at::Tensor> mine, mean;
    for (size_t k = 0; k < shapes.size(); ++k) {
      mine.push_back(rank_gradient(rank, k, shapes[k], step));
      mean.push_back(mean_gradient(dp, k, shapes[k], step));
    }
    reduction.reduce_over_data_parallel(mine, comm);
    zero1->step(reduction.for_optimizer(), 0.01);
    adamw->step(mean, 0.01);
  }
  for (size_t k = 0; k < shapes.size(); ++k) {
    const at::Tensor got = sharded[k].tensor.to(at::kDouble), expected = whole[k].tensor.to(at::kDouble);
    const double tolerance = dtype == at::kFloat ? 1e-6 : 1e-2;
    EXPECT_LE((got - expected).abs().max().item<double>(), tolerance * expected.abs().max().item<double>())
        << "parameter " << k << ": " << got << " vs " << expected;
    expect_identical_over_dp(comm, sharded[k].tensor, "parameter " + std::to_string(k));
  }

  // Optimizer state: this rank's shard of it. Summed over dp, exactly adamw's; per rank total/dp,
  // plus less than one element per parameter and state tensor where chunks are padded.
  const int64_t total = adamw->state_bytes(), mine = zero1->state_bytes();
  EXPECT_EQ(sum_over_dp(comm, mine), total);
  bool divides = true;
  int64_t numel_here = 0;
  for (const auto& p : sharded) {
    divides &= p.tensor.numel() % dp == 0;
    numel_here += zero_shard(p.tensor.numel(), rank, dp).length;
  }
  const int64_t bytes_per_element = dtype == at::kFloat ? 8 : 12;  // two moments (+ an fp32 master)
  EXPECT_EQ(mine, bytes_per_element * numel_here);
  if (divides)
    EXPECT_EQ(mine * dp, total);
  else
    EXPECT_LT(mine, total / dp + bytes_per_element * static_cast<int64_t>(shapes.size()));
}

TEST(Zero1AdamW, MatchesAdamWOnTheMeanGradientWithUnevenShards) { check_zero1_against_adamw(kShapes, at::kFloat); }
TEST(Zero1AdamW, StateIsExactlyTotalOverDpWhenSizesDivide) {
  check_zero1_against_adamw({{8}, {4, 4}, {2, 4}}, at::kFloat);
}
TEST(Zero1AdamW, Bf16ParametersKeepFp32MasterShards) { check_zero1_against_adamw(kShapes, at::kBFloat16); }

// ---- whole runs --------------------------------------------------------------------------------

std::string run_config(const fs::path& run_dir, int dp, int accumulation, int zero_stage) {
  return "general: {project: test, run: dp, seed: 5, device: cpu}\n"
         "checkpoints: {checkpoints_path: " +
         run_dir.string() + ", checkpoint_interval: 1000}\nparallelism: {dp: " + std::to_string(dp) +
         ", tp: 1, pp: 1, pp_engine: afab}\n"
         "model:\n"
         "  plugin: llama\n"
         "  dtype: float32\n"
         "  ddp_bucket_cap_mb: 1\n"
         "  init_method: {std: 0.02}\n"
         "  model_config: {vocab_size: 64, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,\n"
         "                 num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,\n"
         "                 tie_word_embeddings: true}\n"
         "tokens: {sequence_length: 32, micro_batch_size: 2, batch_accumulation_per_replica: " +
         std::to_string(accumulation) +
         ", train_steps: 4}\n"
         "optimizer:\n"
         "  optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95, adam_eps: 1.0e-8}\n"
         "  zero_stage: " +
         std::to_string(zero_stage) +
         "\n"
         "  weight_decay: 0.01\n"
         "  clip_grad: 0.5\n"
         "  accumulate_grad_in_fp32: true\n"
         "  learning_rate_scheduler: {learning_rate: 0.01, lr_warmup_steps: 2}\n"
         "data_stages: [{name: synthetic, start_training_step: 1, data: {dataset: null, seed: 3}}]\n"
         "logging: {log_level: warning, iteration_step_info_interval: 1}\n";
}

// dp ranks × 2 micro-batches of 2 against one rank × 2·dp micro-batches of 2: the same samples per
// step, so the same global gradients (norms, clipped here) and the same parameters after 4 steps.
void check_training_against_one_rank(int zero_stage) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const fs::path base = fs::temp_directory_path() / ("triax_dp_test_" + std::to_string(::getppid()) + "_rank" +
                                                     std::to_string(comm.rank(TRIAX_GROUP_WORLD)));
  fs::remove_all(base);

  SingleProcessCommunicator alone;
  Trainer reference(parse_train_config(YAML::Load(run_config(base / "one", 1, 2 * dp, 0)), "one.yaml"),
                    testing::test_plugin_registry(), alone);
  TrainSummary expected = reference.train();
  // The parallel run's folder is shared by its ranks (its final checkpoint is one folder).
  const fs::path shared = fs::temp_directory_path() /
                          ("triax_dp_test_" + std::to_string(::getppid()) + "_zero" + std::to_string(zero_stage));
  Trainer parallel(parse_train_config(YAML::Load(run_config(shared, dp, 2, zero_stage)), "dp.yaml"),
                   testing::test_plugin_registry(), comm);
  TrainSummary got = parallel.train();

  ASSERT_EQ(got.grad_norms.size(), expected.grad_norms.size());
  for (size_t i = 0; i < expected.grad_norms.size(); ++i)
    EXPECT_NEAR(got.grad_norms[i], expected.grad_norms[i], 1e-5 * expected.grad_norms[i]) << "step " << i + 1;
  const auto& mine = parallel.parameters();
  const auto& theirs = reference.parameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t k = 0; k < mine.size(); ++k) {
    const double scale = theirs[k].tensor.abs().max().item<double>();
    EXPECT_LE((mine[k].tensor - theirs[k].tensor).abs().max().item<double>(), 1e-5 * scale) << mine[k].name;
    expect_identical_over_dp(comm, mine[k].tensor.detach(), mine[k].name);
  }
  fs::remove_all(base);
}

TEST(DataParallelTraining, MatchesOneRankWithTheSameGlobalBatch) { check_training_against_one_rank(0); }
TEST(DataParallelTraining, ZeroStage1MatchesOneRankWithTheSameGlobalBatch) { check_training_against_one_rank(1); }

}  // namespace
}  // namespace triax
