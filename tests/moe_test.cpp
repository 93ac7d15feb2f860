// The moe model plugin's parts on one rank: config refusals naming their keys, the MoE block
// against a dense per-token reference (both dispatchers), the balance loss pulling a deliberately
// imbalanced router toward uniform load, the grouped GEMM against the per-expert loop on CPU, and
// the refusals of the block's options (plugins/models/moe_block).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <functional>
#include <iostream>

#include "error_of.hpp"
#include "grouped_experts.hpp"
#include "moe_block.hpp"
#include "moe_config.hpp"
#include "moe_model.hpp"
#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/swiglu_mlp.hpp"

namespace triax::moe {
namespace {

using test::error_of;

const char* kTiny =
    "vocab_size: 32\nhidden_size: 16\nintermediate_size: 24\nnum_hidden_layers: 2\nnum_attention_heads: 2\n"
    "max_position_embeddings: 16\n";

std::string config_error(const std::string& moe_yaml) {
  return error_of<ConfigError>([&] {
    ConfigReader reader = ConfigReader::from_text(std::string(kTiny) + "moe_config: {" + moe_yaml + "}",
                                                  "model.model_config");
    MoeConfig::read(reader);
  });
}

TEST(MoeConfig, RefusesWhatCannotBeRouted) {
  EXPECT_NE(config_error("num_experts: 4, top_k: 5").find("model.model_config.moe_config.top_k: 5 is larger than "
                                                          "num_experts (4)"),
            std::string::npos);
  EXPECT_NE(config_error("token_dispatcher_type: ring").find("moe_config.token_dispatcher_type: expected one of: "
                                                             "alltoall, allgather; got 'ring'"),
            std::string::npos);
  EXPECT_NE(config_error("layers: [1, 1]").find("moe_config.layers: layer 1 is listed twice"), std::string::npos);
  EXPECT_NE(config_error("layers: [2]").find("moe_config.layers: layer 2 is outside 0..1"), std::string::npos);
  EXPECT_NE(config_error("num_expert: 4").find("num_expert"), std::string::npos);  // a misspelt key
  EXPECT_EQ(config_error("num_experts: 4, top_k: 4"), "(no error)");
}

TEST(MoeConfig, RefusesExpertsThatDoNotSplitOverEp) {
  ConfigReader reader = ConfigReader::from_text(std::string(kTiny) + "moe_config: {num_experts: 4}", "model.model_config");
  ModelContext context;
  context.ep_size = 3;
  context.dp_size = 3;
  context.last_block = 4;
  const std::string message = error_of<ConfigError>([&] { MoeModel::create(reader, context); });
  EXPECT_NE(message.find("model.model_config.moe_config.num_experts: 4 is not divisible by "
                         "parallelism.expert_parallel_size (3)"),
            std::string::npos)
      << message;
}

// The first inconsistent option, named by its field, as a plugin would turn it into its key.
std::string options_error(const std::function<void(MoeBlockOptions&)>& change) {
  MoeBlockOptions o;
  o.hidden_size = 16;
  o.expert_intermediate_size = 8;
  o.score = RouterScore::Sigmoid;
  change(o);
  std::string found = "(no error)";
  o.check([&](const std::string& field, const std::string& why) { found = field + ": " + why; });
  return found;
}

TEST(MoeBlockOptions, RefusesGroupsThatCannotRoute) {
  EXPECT_EQ(options_error([](MoeBlockOptions& o) { o.n_group = 3; }), "n_group: 3 does not divide num_experts (8)");
  EXPECT_EQ(options_error([](MoeBlockOptions& o) { o.n_group = 8; }),
            "n_group: 8 groups of 8 experts leave fewer than two experts per group");
  EXPECT_EQ(options_error([](MoeBlockOptions& o) { o.n_group = 4; o.topk_group = 5; }),
            "topk_group: 5 is larger than n_group (4)");
  EXPECT_EQ(options_error([](MoeBlockOptions& o) { o.n_group = 4; o.topk_group = 1; o.top_k = 3; }),
            "top_k: 3 is more than the 2 experts of topk_group (1) groups");
  EXPECT_EQ(options_error([](MoeBlockOptions& o) { o.routed_scaling_factor = 0.0; }),
            "routed_scaling_factor: must be positive, got 0.000000");
  EXPECT_EQ(options_error([](MoeBlockOptions& o) { o.n_group = 4; o.topk_group = 2; o.top_k = 4; }), "(no error)");
}

MoeConfig block_config(bool shared, const std::string& dispatcher) {
  ConfigReader reader = ConfigReader::from_text(
      std::string(kTiny) + "moe_config: {num_experts: 4, top_k: 2, moe_intermediate_size: 8, norm_topk_prob: " +
          (shared ? "false" : "true") + ", enable_shared_expert: " + (shared ? "true" : "false") +
          ", shared_expert_intermediate_size: 12, token_dispatcher_type: " + dispatcher + "}",
      "model.model_config");
  return MoeConfig::read(reader);
}

void randomize(torch::nn::Module& module, uint64_t seed) {
  at::manual_seed(seed);
  at::NoGradGuard no_grad;
  for (auto& p : module.parameters()) p.normal_(0.0, 0.3);
}

at::Tensor swiglu_expert(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down) {
  return at::matmul(at::silu(at::matmul(x, gate.t())) * at::matmul(x, up.t()), down.t());
}

// Each token on its own: softmax, top-k, each chosen expert's SwiGLU, gated; the shared expert.
TEST(MoeBlock, EqualsThePerTokenDefinition) {
  for (const bool shared : {false, true}) {
    for (const char* dispatcher : {"alltoall", "allgather"}) {
      SCOPED_TRACE(std::string(dispatcher) + (shared ? ", shared expert" : ""));
      const MoeConfig config = block_config(shared, dispatcher);
      MoeBlock block(config.block_options(), ModelContext{});
      randomize(block, 3);
      at::manual_seed(4);
      const at::Tensor x = at::randn({2, 5, 16});
      const at::Tensor out = block.forward(x);
      const at::Tensor tokens = x.reshape({-1, 16});
      for (int64_t t = 0; t < tokens.size(0); ++t) {
        const at::Tensor row = tokens[t];
        const at::Tensor probs = at::softmax(at::matmul(block.gate->weight, row), 0);
        auto [values, experts] = at::topk(probs, 2);
        if (!shared) values = values / values.sum();
        at::Tensor expected = at::zeros({16});
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t e = experts[j].item<int64_t>();
          expected += values[j] * swiglu_expert(row.unsqueeze(0), block.experts->gate_proj[e], block.experts->up_proj[e],
                                                block.experts->down_proj[e])[0];
        }
        if (shared) {
          const auto& s = dynamic_cast<const SwiGluMlp&>(*block.shared_expert.module);
          expected += at::sigmoid(at::dot(block.shared_expert_gate->weight[0], row)) *
                      swiglu_expert(row.unsqueeze(0), s.gate_up_proj->weight[0], s.gate_up_proj->weight[1],
                                    s.down_proj->weight)[0];
        }
        EXPECT_TRUE(at::allclose(out.reshape({-1, 16})[t], expected, 1e-5, 1e-6)) << "token " << t;
      }
    }
  }
}

// A decoding step's few tokens go by expert (each (token, slot) row through its own expert's
// matrices, no host synchronisation): only at inference and at most as many rows as experts; the
// output is the dispatcher's.
TEST(MoeBlock, ServesADecodingStepByExpertAsTheDispatcher) {
  const MoeConfig config = block_config(/*shared=*/false, "alltoall");
  MoeBlock block(config.block_options(), ModelContext{});
  randomize(block, 5);
  at::manual_seed(6);
  const at::Tensor x = at::randn({2, 1, 16});
  const at::Tensor dispatched = block.forward(x);  // training mode: the dispatcher
  EXPECT_FALSE(block.serves_by_expert(2));
  block.eval();
  {
    at::NoGradGuard no_grad;
    ASSERT_TRUE(block.serves_by_expert(2)) << "2 tokens x top-2 over 4 experts";
    EXPECT_FALSE(block.serves_by_expert(3));
    EXPECT_TRUE(at::allclose(block.forward(x), dispatched, 1e-5, 1e-6));
  }
  EXPECT_FALSE(block.serves_by_expert(2)) << "grad mode on";
}

// parallelism.moe_layer_recompute: the block keeps only its input (one recompute node ends its
// graph) and gives the same output, router losses and gradients as the block that keeps everything.
TEST(MoeBlock, RecomputedEqualsTheKeptBlock) {
  const MoeConfig config = block_config(/*shared=*/true, "alltoall");
  ModelContext recomputing;
  recomputing.recompute_moe_layers = true;
  struct Run {
    at::Tensor out, input_grad;
    std::vector<at::Tensor> statistics, grads;
    std::string node;
  };
  auto run = [&](const ModelContext& context) {
    MoeBlock block(config.block_options(), context);
    randomize(block, 3);
    at::manual_seed(4);
    const at::Tensor x = at::randn({2, 5, 16}).requires_grad_();
    Run r;
    r.out = block.forward(x);
    r.node = r.out.grad_fn()->name();
    const std::optional<RouterStatistics> s = block.take_statistics();
    EXPECT_TRUE(s.has_value());
    if (!s) return r;
    (r.out.pow(2).sum() + s->balance * 0.5 + s->z_loss * 0.1).backward();
    r.statistics = {s->balance.detach(), s->z_loss.detach(), s->load_max.detach()};
    r.input_grad = x.grad();
    for (const at::Tensor& p : block.parameters()) r.grads.push_back(p.grad());
    return r;
  };
  const Run kept = run(ModelContext{}), recomputed = run(recomputing);
  EXPECT_EQ(kept.node.find("RecomputeFunction"), std::string::npos) << kept.node;
  EXPECT_NE(recomputed.node.find("RecomputeFunction"), std::string::npos) << recomputed.node;
  EXPECT_TRUE(at::equal(kept.out, recomputed.out));
  for (size_t i = 0; i < kept.statistics.size(); ++i)
    EXPECT_TRUE(at::allclose(kept.statistics[i], recomputed.statistics[i], 1e-6, 1e-7)) << "statistic " << i;
  EXPECT_TRUE(at::allclose(kept.input_grad, recomputed.input_grad, 1e-5, 1e-6));
  ASSERT_EQ(kept.grads.size(), recomputed.grads.size());
  for (size_t i = 0; i < kept.grads.size(); ++i) {
    ASSERT_TRUE(recomputed.grads[i].defined()) << "parameter " << i;
    EXPECT_TRUE(at::allclose(kept.grads[i], recomputed.grads[i], 1e-5, 1e-6)) << "parameter " << i;
  }
}

// A router whose scores all lean to expert 0: minimising the balance loss alone moves the load
// toward the uniform share (max 2.0 at top-2 of 4 when every token picks expert 0).
TEST(MoeRouter, BalanceLossPullsAnImbalancedRouterTowardUniform) {
  MoeBlockOptions options;
  options.hidden_size = 16;
  options.num_experts = 4;
  options.top_k = 2;
  TopKRouter router(options, ModelContext{});
  at::manual_seed(5);
  const at::Tensor direction = at::randn({16});
  const at::Tensor tokens = at::randn({512, 16}) + direction;  // every token leans one way
  {
    at::NoGradGuard no_grad;
    router.weight.normal_(0.0, 0.1);
    router.weight[0].copy_(direction * 0.15);  // expert 0 scores highest for (almost) every token
  }
  const RouterStatistics before = router.statistics(router.route(tokens));
  std::cout << "before: load max " << before.load_max.item<double>() << " min " << before.load_min.item<double>() << " cv " << before.load_cv.item<double>() << "\n";
  ASSERT_GT(before.load_max.item<double>(), 1.5);
  for (int step = 0; step < 200; ++step) {
    router.weight.mutable_grad() = at::Tensor();
    router.statistics(router.route(tokens)).balance.backward();
    at::NoGradGuard no_grad;
    router.weight.sub_(router.weight.grad() * 1.0);
  }
  const RouterStatistics after = router.statistics(router.route(tokens));
  std::cout << "after: load max " << after.load_max.item<double>() << " min " << after.load_min.item<double>() << " cv " << after.load_cv.item<double>() << "\n";
  EXPECT_LT(after.balance.item<double>(), before.balance.item<double>());
  EXPECT_LT(after.load_max.item<double>(), before.load_max.item<double>() - 0.3);
  EXPECT_LT(after.load_cv.item<double>(), 0.5 * before.load_cv.item<double>());
  EXPECT_GT(after.load_min.item<double>(), before.load_min.item<double>());
}

// The grouped GEMM (at::_grouped_mm also runs on CPU in fp32) against the loop, forward and
// backward, with an expert that receives no rows.
TEST(MoeGroupedExperts, GroupedGemmEqualsTheLoopOnCpu) {
  at::manual_seed(6);
  const std::vector<int64_t> counts = {3, 0, 5, 8};
  const at::Tensor rows = at::randn({16, 16}).requires_grad_();
  const at::Tensor gate = at::randn({4, 8, 16}).requires_grad_(), up = at::randn({4, 8, 16}).requires_grad_();
  const at::Tensor down = at::randn({4, 16, 8}).requires_grad_();
  const at::Tensor seed = at::randn({16, 16});
  auto run = [&](auto implementation) {
    for (const at::Tensor& t : {rows, gate, up, down}) const_cast<at::Tensor&>(t).mutable_grad() = at::Tensor();
    at::Tensor out = implementation(rows, counts, gate, up, down);
    (out * seed).sum().backward();
    return std::vector<at::Tensor>{out.detach(), rows.grad().clone(), gate.grad().clone(), up.grad().clone(),
                                   down.grad().clone()};
  };
  const auto loop = run(experts_loop), grouped = run(experts_grouped_mm);
  for (size_t i = 0; i < loop.size(); ++i) EXPECT_TRUE(at::allclose(grouped[i], loop[i], 1e-5, 1e-5)) << "tensor " << i;
  EXPECT_EQ(loop[2][1].abs().max().item<double>(), 0.0);  // the expert without rows: a zero gradient
}

// Generation through the cache: a prefix, then one token at a time, gives the logits of one full
// forward over the whole sequence (a dense layer, a MoE layer with a shared expert).
TEST(MoeModel, CachedIncrementalLogitsEqualTheFullForward) {
  ConfigReader reader = ConfigReader::from_text(
      std::string(kTiny) + "moe_config: {num_experts: 4, top_k: 2, layers: [1], moe_intermediate_size: 8, "
                           "enable_shared_expert: true, shared_expert_intermediate_size: 12}",
      "model.model_config");
  ModelContext context;
  context.last_block = 4;
  context.seed = 9;
  context.init_method = YAML::Load("{std: 0.2}");
  auto model = MoeModel::create(reader, context);
  model->eval();
  at::manual_seed(10);
  const at::Tensor ids = at::randint(32, {2, 10}, at::kLong);
  at::NoGradGuard no_grad;
  StageInput full;
  full.input_ids = ids;
  full.want_logits = true;
  const at::Tensor expected = model->forward(full).logits;
  std::vector<std::unique_ptr<InferenceCache>> caches;
  std::vector<InferenceCache*> rows;
  for (int i = 0; i < 2; ++i) {
    caches.push_back(model->create_cache(16));
    rows.push_back(caches.back().get());
  }
  std::vector<at::Tensor> pieces;
  for (int64_t start = 0; start < 10; start += start == 0 ? 4 : 1) {
    StageInput step;
    step.input_ids = ids.narrow(1, start, start == 0 ? 4 : 1);
    pieces.push_back(model->forward_cached(rows, step).logits);
  }
  const at::Tensor logits = at::cat(pieces, 1);
  ASSERT_EQ(logits.sizes(), expected.sizes());
  EXPECT_LT((logits - expected).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(caches[0]->length(), 10);
}

}  // namespace
}  // namespace triax::moe
