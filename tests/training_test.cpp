// The training loop and its parts: LR schedule values, synthetic data, gradient accumulation
// and clipping, AdamW against a hand-written reference (through the plugin's C ABI), and whole
// runs: the loss falls, runs are deterministic, accumulation matches a larger micro-batch.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test_plugin_registry.hpp"
#include "training_test_support.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/config/train_config.hpp"
#include "triax/parallel/data_parallel_gradients.hpp"
#include "gradients/gradient_accumulator.hpp"
#include "triax/lr/lr_schedule.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/data/synthetic_data.hpp"
#include "triax/core/trainer.hpp"
#include "gradients/weight_decay.hpp"
#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"
#include "triax/zero_partition.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;
using testing::make_optimizer;
using testing::run;
using testing::temp_run_dir;
using testing::tiny_config;

LrSchedulerConfig schedule_config(const std::string& warmup_style, const std::string& decay_style) {
  LrSchedulerConfig c;
  c.learning_rate = 1.0;
  c.lr_warmup_steps = 10;
  c.lr_warmup_style = warmup_style;
  c.lr_decay_style = decay_style;
  c.lr_decay_starting_step = 10;
  c.lr_decay_steps = 100;
  c.min_decay_lr = 0.1;
  return c;
}

TEST(LearningRateSchedule, LinearWarmupThenCosine) {
  LearningRateSchedule s(schedule_config("linear", "cosine"));
  EXPECT_DOUBLE_EQ(s.value_at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.value_at(5), 0.5);
  EXPECT_DOUBLE_EQ(s.value_at(10), 1.0);
  EXPECT_NEAR(s.value_at(60), 0.1 + 0.9 * (1 + std::cos(M_PI * 0.5)) / 2, 1e-12);  // half-way: 0.55
  EXPECT_NEAR(s.value_at(60), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(s.value_at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.value_at(500), 0.1);
  // Training step s uses the value after s - 1 completed steps, as nanotron's LambdaLR does.
  EXPECT_DOUBLE_EQ(s.for_step(1), 0.0);
  EXPECT_DOUBLE_EQ(s.for_step(11), 1.0);
}

TEST(LearningRateSchedule, LinearAndOneMinusSqrtDecay) {
  LearningRateSchedule linear(schedule_config("linear", "linear"));
  EXPECT_NEAR(linear.value_at(35), 0.1 + 0.9 * 0.75, 1e-12);
  LearningRateSchedule sqrt_decay(schedule_config("linear", "1-sqrt"));
  EXPECT_NEAR(sqrt_decay.value_at(35), 0.1 + 0.9 * (1 - std::sqrt(0.25)), 1e-12);
}

TEST(LearningRateSchedule, ConstantWarmupAndDelayedDecay) {
  LrSchedulerConfig c = schedule_config("constant", "linear");
  c.lr_decay_starting_step = 50;
  LearningRateSchedule s(c);
  EXPECT_DOUBLE_EQ(s.value_at(1), 1.0);   // constant warm-up
  EXPECT_DOUBLE_EQ(s.value_at(30), 1.0);  // constant until decay starts
  EXPECT_NEAR(s.value_at(100), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(s.value_at(150), 0.1);
}

TEST(LearningRateSchedule, NoWarmupNoDecayIsConstant) {
  LrSchedulerConfig c;
  c.learning_rate = 0.3;
  c.lr_warmup_steps = 0;
  c.lr_decay_steps = 0;
  LearningRateSchedule s(c);
  EXPECT_DOUBLE_EQ(s.value_at(0), 0.3);
  EXPECT_DOUBLE_EQ(s.value_at(1000), 0.3);
}

TEST(SyntheticTokenStream, DeterministicPerSampleAndSeed) {
  SyntheticTokenStream a(64, 16, 7), b(64, 16, 7), c(64, 16, 8);
  at::Tensor batch = a.samples(10, 4);
  ASSERT_EQ(batch.sizes(), (std::vector<int64_t>{4, 17}));
  EXPECT_TRUE(at::equal(batch, b.samples(10, 4)));
  EXPECT_TRUE(at::equal(batch.narrow(0, 2, 2), a.samples(12, 2)));  // sample i depends on i only
  EXPECT_FALSE(at::equal(batch, c.samples(10, 4)));
  EXPECT_GE(batch.min().item<int64_t>(), 0);
  EXPECT_LT(batch.max().item<int64_t>(), 64);
  EXPECT_NEAR(SyntheticTokenStream::entropy_rate(), 1.1097, 1e-3);  // -Σ p ln p
  EXPECT_THROW(SyntheticTokenStream(2, 16, 1), ConfigError);
}

TEST(SyntheticTokenStream, EachTokenHasAtMostFourSuccessors) {
  SyntheticTokenStream stream(32, 64, 3);
  at::Tensor tokens = stream.samples(0, 200);
  std::vector<std::set<int64_t>> successors(32);
  auto acc = tokens.accessor<int64_t, 2>();
  for (int64_t r = 0; r < tokens.size(0); ++r)
    for (int64_t i = 1; i < tokens.size(1); ++i) successors[acc[r][i - 1]].insert(acc[r][i]);
  for (const auto& s : successors) EXPECT_LE(s.size(), 4u);
}

std::vector<NamedParameter> make_parameters(at::ScalarType dtype) {
  std::vector<NamedParameter> params;
  for (int i = 0; i < 2; ++i) {
    at::Tensor t = at::zeros({3, 2}, at::TensorOptions().dtype(dtype)).requires_grad_(true);
    params.push_back({"p" + std::to_string(i), t, ParameterSpec::sharded({3, 2}, 0, 0)});
  }
  return params;
}

TEST(GradientAccumulator, AccumulatesLowPrecisionGradientsInFp32) {
  auto params = make_parameters(at::kBFloat16);
  GradientAccumulator acc(params, /*accumulate_in_fp32=*/true);
  ASSERT_TRUE(acc.uses_fp32_buffers());
  acc.zero();
  // 1000 micro-batches each adding 1e-3: bf16 accumulation would stall far below 1.
  for (int i = 0; i < 1000; ++i) {
    (params[0].tensor.to(at::kFloat).sum() * 1e-3).backward();
    acc.after_backward();
  }
  const auto& grads = acc.gradients();
  ASSERT_EQ(grads[0].scalar_type(), at::kFloat);
  EXPECT_NEAR(grads[0][0][0].item<double>(), 1.0, 5e-3);
  EXPECT_EQ(grads[1].abs().sum().item<double>(), 0.0);  // no gradient: zeros

  // The next step starts afresh: the parameter that had a gradient last step and has none now
  // reads zeros; the other sums this step's two micro-batches only.
  acc.zero();
  for (int i = 0; i < 2; ++i) {
    (params[1].tensor.to(at::kFloat).sum() * 0.5).backward();
    acc.after_backward();
  }
  const auto& next = acc.gradients();
  EXPECT_EQ(next[0].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(next[1][2][1].item<double>(), 1.0);
}

TEST(DataParallelGradients, OneRankClipsToTheGlobalNorm) {
  auto params = make_parameters(at::kFloat);
  GradientAccumulator acc(params, true);
  DataParallelGradients reduction(params, TRIAX_GRADIENTS_WHOLE, 25 << 20, {0, 1}, {true, true});
  SingleProcessCommunicator comm;
  acc.zero();
  (params[0].tensor.sum() * 2.0 + params[1].tensor.sum() * 1.0).backward();
  reduction.reduce_over_data_parallel(acc.gradients(), comm);
  // |g| = sqrt(6·4 + 6·1) = sqrt(30)
  at::Tensor norm = reduction.clip(1.0, comm);
  EXPECT_NEAR(norm.item<double>(), std::sqrt(30.0), 1e-6);
  double clipped = 0;
  for (const auto& g : reduction.for_optimizer()) clipped += g.pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(clipped), 1.0, 1e-5);
  // Below the threshold nothing changes.
  acc.zero();
  (params[0].tensor.sum() * 0.01).backward();
  reduction.reduce_over_data_parallel(acc.gradients(), comm);
  reduction.clip(1.0, comm);
  EXPECT_NEAR(reduction.for_optimizer()[0][0][0].item<double>(), 0.01, 1e-7);
}

TEST(WeightDecayPolicy, PatternsAnchorAtTheStartAndFlagsExclude) {
  WeightDecayPolicy policy(0.1, {".*norm.*", "model\\.embed_tokens"});
  auto param = [](const std::string& name, uint32_t flags = 0, const std::string& tied = "") {
    NamedParameter p{name, at::zeros({2}), ParameterSpec::replicated(at::zeros({2}), flags)};
    p.spec.tied_key = tied;
    return p;
  };
  EXPECT_EQ(policy.for_parameter(param("model.layers.0.input_layernorm.weight")), 0.0);
  EXPECT_EQ(policy.for_parameter(param("model.embed_tokens.weight")), 0.0);
  EXPECT_EQ(policy.for_parameter(param("model.layers.0.mlp.gate_up_proj.weight")), 0.1);
  // Anchored like Python's re.match: the pattern must match from the first character.
  EXPECT_EQ(policy.for_parameter(param("lm_head.model.embed_tokens")), 0.1);
  // A tied copy is excluded when its tied name matches.
  EXPECT_EQ(policy.for_parameter(param("lm_head.weight", TRIAX_PARAM_TIED, "model.embed_tokens.weight")), 0.0);
  // The model's own flag wins over the patterns.
  EXPECT_EQ(policy.for_parameter(param("model.layers.0.self_attn.qkv_proj.bias", TRIAX_PARAM_NO_WEIGHT_DECAY)), 0.0);
}

// AdamW through the plugin's C ABI against the textbook update in double precision.
void check_adamw(bool fused, at::ScalarType dtype) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  at::Tensor param = at::tensor({0.5, -1.0, 2.0, 0.25}, at::TensorOptions().dtype(at::kDouble)).to(dtype);
  std::string yaml = std::string(
                         "optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95, adam_eps: 1.0e-8, "
                         "torch_adam_is_fused: ") +
                     (fused ? "true" : "false") + "}\n";
  triax_optimizer_context context{};
  context.struct_size = sizeof(context);
  context.dp_size = 1;
  context.optimizer_yaml = yaml.c_str();
  std::vector<triax_optimizer_param> params = {{"w", borrow_handle(param), wd, 0}};
  OptimizerInstance optimizer(testing::test_plugin_registry().optimizer("adamw"), "adamw", context, params);

  std::vector<double> p = {0.5, -1.0, 2.0, 0.25}, m(4, 0), v(4, 0);
  for (int t = 1; t <= 5; ++t) {
    std::vector<double> g = {0.1 * t, -0.2, 0.3 / t, 0.05};
    optimizer.step({at::tensor(g, at::TensorOptions().dtype(at::kDouble)).to(at::kFloat)}, lr);
    for (size_t i = 0; i < 4; ++i) {
      double gi = static_cast<float>(g[i]);
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  const double tolerance = dtype == at::kBFloat16 ? 1e-2 : 1e-5;
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(param[i].item<double>(), p[i], tolerance) << "element " << i;
  // fp32 parameters are their own masters; bf16 ones carry a 4-byte master each.
  int64_t expected = 4 * 4 * 2 + (dtype == at::kFloat ? 0 : 4 * 4);
  EXPECT_EQ(optimizer.state_bytes(), expected);
}

TEST(AdamWPlugin, FusedMatchesReference) { check_adamw(true, at::kFloat); }
TEST(AdamWPlugin, ForeachMatchesReference) { check_adamw(false, at::kFloat); }
TEST(AdamWPlugin, Bf16ParametersUseFp32Masters) { check_adamw(true, at::kBFloat16); }

TEST(ZeroPartition, ChunksCoverEachElementOnce) {
  for (int64_t numel : {0, 1, 3, 7, 8, 10, 13})
    for (int dp = 1; dp <= 4; ++dp) {
      int64_t next = 0;
      for (int r = 0; r < dp; ++r) {
        ZeroShard shard = zero_shard(numel, r, dp);
        EXPECT_EQ(shard.chunk, (numel + dp - 1) / dp);
        EXPECT_EQ(shard.offset, next) << numel << " elements, rank " << r << " of " << dp;
        EXPECT_LE(shard.length, shard.chunk);
        next = shard.offset + shard.length;
      }
      EXPECT_EQ(next, numel) << numel << " elements over " << dp;
    }
  // 10 over 4: chunks of 3, the last rank holds the one element left.
  EXPECT_EQ(zero_shard(10, 3, 4).offset, 9);
  EXPECT_EQ(zero_shard(10, 3, 4).length, 1);
  // 3 over 4: the last rank holds nothing.
  EXPECT_EQ(zero_shard(3, 3, 4).length, 0);
}

// On one rank the shard is the whole flattened parameter: zero1_adamw must step like adamw.
void check_zero1_on_one_rank(at::ScalarType dtype) {
  const std::string yaml = "optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95}\n";
  at::Tensor a0 = at::randn({3, 5}, at::TensorOptions().dtype(at::kDouble)).to(dtype), b0 = at::randn({7}).to(dtype);
  std::vector<at::Tensor> whole = {a0.clone(), b0.clone()}, sharded = {a0.clone(), b0.clone()};
  auto adamw = make_optimizer("adamw", whole, yaml);
  auto zero1 = make_optimizer("zero1_adamw", sharded, yaml);
  EXPECT_EQ(adamw->gradient_sharding(), TRIAX_GRADIENTS_WHOLE);
  EXPECT_EQ(zero1->gradient_sharding(), TRIAX_GRADIENTS_DP_SHARDED);
  for (int t = 0; t < 4; ++t) {
    std::vector<at::Tensor> grads = {at::randn({3, 5}), at::randn({7})};
    adamw->step(grads, 0.01);
    zero1->step({grads[0].reshape({-1}), grads[1]}, 0.01);
  }
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_TRUE(at::equal(whole[i], sharded[i])) << "parameter " << i;
  EXPECT_EQ(zero1->state_bytes(), adamw->state_bytes());
}

TEST(Zero1AdamWPlugin, OneRankStepsLikeAdamW) { check_zero1_on_one_rank(at::kFloat); }
TEST(Zero1AdamWPlugin, OneRankStepsLikeAdamWWithBf16Parameters) { check_zero1_on_one_rank(at::kBFloat16); }

TEST(Zero1AdamWPlugin, RefusesAShardOfTheWrongSize) {
  at::Tensor param = at::zeros({2, 3});
  auto zero1 = make_optimizer("zero1_adamw", {param}, "optimizer_factory: {name: adamW}\n");
  try {
    zero1->step({at::zeros({5})}, 0.01);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("owns 6"), std::string::npos) << e.what();
  }
}

TEST(AdamWPlugin, RefusesUnknownFactoryKey) {
  at::Tensor param = at::zeros({2});
  std::string yaml = "optimizer_factory: {name: adamW, adam_beta3: 0.5}\n";
  triax_optimizer_context context{};
  context.struct_size = sizeof(context);
  context.optimizer_yaml = yaml.c_str();
  std::vector<triax_optimizer_param> params = {{"w", borrow_handle(param), 0.0, 0}};
  try {
    OptimizerInstance optimizer(testing::test_plugin_registry().optimizer("adamw"), "adamw", context, params);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.optimizer_factory.adam_beta3"), std::string::npos) << e.what();
  }
}

// ---- whole runs ------------------------------------------------------------------------------

TEST(Training, LossFallsOnSyntheticData) {
  fs::path dir = temp_run_dir("falls");
  TrainSummary summary = run(tiny_config(dir, 60, 8, 1));
  ASSERT_EQ(summary.losses.size(), 60u);
  EXPECT_NEAR(summary.losses.front(), std::log(64.0), 0.3);        // starts at chance
  EXPECT_LT(summary.losses.back(), 0.6 * summary.losses.front());  // and learns the chain
  // Outputs in the run folder: the resolved config and one metrics line per step.
  EXPECT_TRUE(fs::exists(dir / "config.yaml"));
  // Each line holds its own step's loss, though the values are read one step late.
  std::ifstream metrics(dir / "metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) {
    EXPECT_NE(line.find("\"tokens_per_s\""), std::string::npos);
    long long step = 0, total = 0;
    double loss = 0.0;
    ASSERT_EQ(std::sscanf(line.c_str(), "{\"step\": %lld, \"total_steps\": %lld, \"loss\": %lf", &step, &total, &loss), 3)
        << line;
    EXPECT_EQ(step, lines + 1);
    EXPECT_NEAR(loss, summary.losses[static_cast<size_t>(lines)], 1e-7 * summary.losses.front()) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 60);  // the last step's line too
  fs::remove_all(dir);
}

TEST(Training, SameConfigTwiceGivesIdenticalLosses) {
  fs::path dir = temp_run_dir("determinism");
  TrainSummary first = run(tiny_config(dir, 8, 4, 2));
  TrainSummary second = run(tiny_config(dir, 8, 4, 2));
  ASSERT_EQ(first.losses.size(), 8u);
  for (size_t i = 0; i < first.losses.size(); ++i) {
    EXPECT_EQ(first.losses[i], second.losses[i]) << "step " << i + 1;
    EXPECT_EQ(first.grad_norms[i], second.grad_norms[i]) << "step " << i + 1;
  }
  fs::remove_all(dir);
}

TEST(Training, GradientAccumulationMatchesOneLargeMicroBatch) {
  fs::path dir = temp_run_dir("accumulation");
  TrainSummary accumulated = run(tiny_config(dir, 6, 2, 4));
  TrainSummary single = run(tiny_config(dir, 6, 8, 1));
  for (size_t i = 0; i < single.losses.size(); ++i) {
    EXPECT_NEAR(accumulated.losses[i], single.losses[i], 1e-5 * std::abs(single.losses[i])) << "step " << i + 1;
    EXPECT_NEAR(accumulated.grad_norms[i], single.grad_norms[i], 1e-4 * std::abs(single.grad_norms[i]))
        << "step " << i + 1;
  }
  fs::remove_all(dir);
}

// zero_stage 1 on one rank: the gradients take the ZeRO path (reduce-scatter into shards, the
// norm over the world) and zero1_adamw steps flattened shards, with the same values as adamw.
TEST(Training, ZeroStage1OnOneRankMatchesAdamW) {
  fs::path dir = temp_run_dir("zero1");
  const std::string yaml = tiny_config(dir, 6, 4, 2);
  std::string zero1 = yaml;
  zero1.replace(zero1.find("zero_stage: 0"), 13, "zero_stage: 1");
  TrainSummary whole = run(yaml);
  TrainSummary sharded = run(zero1);
  ASSERT_EQ(sharded.losses.size(), whole.losses.size());
  for (size_t i = 0; i < whole.losses.size(); ++i) {
    EXPECT_NEAR(sharded.losses[i], whole.losses[i], 1e-6 * std::abs(whole.losses[i])) << "step " << i + 1;
    EXPECT_NEAR(sharded.grad_norms[i], whole.grad_norms[i], 1e-6 * std::abs(whole.grad_norms[i])) << "step " << i + 1;
  }
  fs::remove_all(dir);
}

// parallelism.recompute_layer reaches the model through the plugin boundary and changes memory,
// not results: the same losses and gradient norms, step by step.
TEST(Training, RecomputeLayerGivesTheSameRun) {
  fs::path dir = temp_run_dir("recompute");
  const std::string yaml = tiny_config(dir, 6, 4, 2);
  std::string recomputed = yaml;
  recomputed.replace(recomputed.find("pp_engine: afab}"), 16, "pp_engine: afab, recompute_layer: true}");
  TrainSummary kept = run(yaml);
  TrainSummary again = run(recomputed);
  ASSERT_EQ(again.losses.size(), kept.losses.size());
  for (size_t i = 0; i < kept.losses.size(); ++i) {
    EXPECT_NEAR(again.losses[i], kept.losses[i], 1e-6 * std::abs(kept.losses[i])) << "step " << i + 1;
    EXPECT_NEAR(again.grad_norms[i], kept.grad_norms[i], 1e-6 * std::abs(kept.grad_norms[i])) << "step " << i + 1;
  }
  fs::remove_all(dir);
}

TEST(Training, Bf16ParametersTrainWithFp32Accumulation) {
  fs::path dir = temp_run_dir("bf16");
  TrainSummary summary = run(tiny_config(dir, 30, 8, 2, "bfloat16"));
  EXPECT_LT(summary.losses.back(), 0.8 * summary.losses.front());
  fs::remove_all(dir);
}

TEST(Training, DivergenceStopsTheRunNamingTheStep) {
  fs::path dir = temp_run_dir("diverged");
  std::string yaml = tiny_config(dir, 20, 4, 1);
  yaml.replace(yaml.find("learning_rate: 0.01"), 19, "learning_rate: 1.0e+6");
  yaml.replace(yaml.find("min_decay_lr: 0.001"), 19, "min_decay_lr: 1.0");
  yaml.replace(yaml.find("clip_grad: 1.0"), 14, "clip_grad: null");
  try {
    run(yaml);
    FAIL() << "expected the run to stop";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("diverged"), std::string::npos) << message;
    EXPECT_NE(message.find("step "), std::string::npos) << message;
  }
  fs::remove_all(dir);
}

// Building a trainer from `yaml` (whose run folder is `dir`) throws E whose message contains
// every one of `expected`.
template <class E>
void expect_trainer_error(const fs::path& dir, const std::string& yaml, const std::vector<std::string>& expected) {
  TrainConfig config = parse_train_config(YAML::Load(yaml), "test.yaml");
  SingleProcessCommunicator comm;
  try {
    Trainer trainer(std::move(config), testing::test_plugin_registry(), comm);
    FAIL() << "expected an error";
  } catch (const E& e) {
    const std::string message = e.what();
    for (const auto& text : expected) EXPECT_NE(message.find(text), std::string::npos) << message;
  }
  fs::remove_all(dir);
}

TEST(Training, UnknownPluginNamesTheAvailableOnes) {
  fs::path dir = temp_run_dir("unknown");
  std::string yaml = tiny_config(dir, 2, 2, 1);
  yaml.replace(yaml.find("pp_engine: afab"), 15, "pp_engine: zigzag");
  expect_trainer_error<PluginError>(dir, yaml, {"zigzag", "afab"});
}

TEST(Training, ModelConfigErrorsNameTheFileAndKey) {
  fs::path dir = temp_run_dir("model_config");
  std::string yaml = tiny_config(dir, 2, 2, 1);
  yaml.replace(yaml.find("num_key_value_heads: 2"), 22, "num_key_value_heads: 3");
  expect_trainer_error<ConfigError>(dir, yaml, {"test.yaml", "model.model_config.num_key_value_heads"});
}

// general.cuda_graphs where general.device auto finds no GPU: refused before any step, naming the
// key (tests/gpu/cuda_graphs_equal_eager.sh checks the graphs themselves on a GPU).
TEST(Training, CudaGraphsWithoutAGpuAreRefused) {
  if (at::hasCUDA()) GTEST_SKIP() << "a GPU is present: general.device auto would use it";
  fs::path dir = temp_run_dir("cuda_graphs");
  std::string yaml = tiny_config(dir, 2, 2, 1);
  yaml.replace(yaml.find("device: cpu}"), 12, "device: auto, cuda_graphs: true}");
  expect_trainer_error<ConfigError>(dir, yaml, {"general.cuda_graphs", "CUDA device"});
}

}  // namespace
}  // namespace triax
