// Spectral muP: the scaling rules of triax/spectral_mup.hpp, the roles and learning-rate scales
// that the llama and moe plugins declare through the ABI (read by the host as training reads
// them), the optimizers applying those scales, and the refusals: use_mup for a plugin without
// support, and std beside use_mup.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "test_plugin_registry.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/error.hpp"
#include "triax/spectral_mup.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {
namespace {

using test::error_of;

// ---- the rules --------------------------------------------------------------------------------

TEST(SpectralMupRule, MatrixStdAndLearningRateFollowTheFans) {
  // Widening (fan_out > fan_in): sigma = 1/sqrt(fan_in), the learning rate x fan_out/fan_in.
  SpectralScale up = spectral_scale(ParameterRole::Matrix, 64, 256);
  EXPECT_DOUBLE_EQ(up.init_std, 1.0 / 8.0);
  EXPECT_DOUBLE_EQ(up.lr_scale, 4.0);
  // Narrowing: sigma = (1/sqrt(fan_in)) * sqrt(fan_out/fan_in).
  SpectralScale down = spectral_scale(ParameterRole::Matrix, 256, 64);
  EXPECT_DOUBLE_EQ(down.init_std, (1.0 / 16.0) * 0.5);
  EXPECT_DOUBLE_EQ(down.lr_scale, 0.25);
  // Square: 1/sqrt(n) and the base learning rate, at any width.
  EXPECT_DOUBLE_EQ(spectral_scale(ParameterRole::Matrix, 100, 100).init_std, 0.1);
  EXPECT_DOUBLE_EQ(spectral_scale(ParameterRole::Matrix, 100, 100).lr_scale, 1.0);
}

TEST(SpectralMupRule, EmbeddingsAndVectorsKeepTheBaseLearningRate) {
  SpectralScale embedding = spectral_scale(ParameterRole::Embedding, 0, 0);
  EXPECT_DOUBLE_EQ(embedding.init_std, 1.0);
  EXPECT_DOUBLE_EQ(embedding.lr_scale, 1.0);
  EXPECT_DOUBLE_EQ(spectral_scale(ParameterRole::Vector, 0, 0).lr_scale, 1.0);
  EXPECT_NE(error_of<Error>([] { spectral_scale(ParameterRole::Undeclared, 1, 1); }).find("without a declared role"),
            std::string::npos);
  EXPECT_NE(error_of<Error>([] { spectral_scale(ParameterRole::Matrix, 0, 4); }).find("fan_in 0"), std::string::npos);
}

TEST(SpectralMupRule, FansComeFromTheMeaningfulGlobalShape) {
  // A tp shard of a padded vocabulary head: the whole, unpadded [vocab, hidden] counts.
  ParameterSpec head = ParameterSpec::sharded({264, 64}, 0, 132, 0, ParameterRole::Matrix);
  head.unpadded_shape = {260, 64};
  EXPECT_EQ(fans_of("lm_head.weight", head).fan_in, 64);
  EXPECT_EQ(fans_of("lm_head.weight", head).fan_out, 260);
  // A stack of expert matrices [experts, fan_out, fan_in]: one of them.
  ParameterSpec experts = ParameterSpec::sharded({8, 32, 16}, 0, 4, 0, ParameterRole::Matrix);
  EXPECT_EQ(fans_of("experts.up_proj", experts).fan_in, 16);
  EXPECT_EQ(fans_of("experts.up_proj", experts).fan_out, 32);
  // A fused q/k/v grouped by key/value head [kv_heads, (group + 2) x head_dim, hidden]: as wide
  // as its widest part (the query heads), which says so; without that it is refused.
  ParameterSpec qkv = ParameterSpec::sharded({2, 64, 64}, 0, 1, 0, ParameterRole::FusedMatrix);
  EXPECT_NE(error_of<Error>([&] { fans_of("qkv_proj.weight", qkv); }).find("'qkv_proj.weight'"), std::string::npos);
  qkv.part_fan_out = 64;
  EXPECT_EQ(fans_of("qkv_proj.weight", qkv).fan_in, 64);
  EXPECT_EQ(fans_of("qkv_proj.weight", qkv).fan_out, 64);
  ParameterSpec vector = ParameterSpec::sharded({8}, 0, 0, 0, ParameterRole::Matrix);
  EXPECT_NE(error_of<Error>([&] { fans_of("gain", vector); }).find("'gain' has 1 dimensions"), std::string::npos);
}

TEST(SpectralMupRule, EveryParameterMustDeclareItsRole) {
  std::vector<NamedParameter> parameters;
  at::Tensor plain = at::zeros({4, 4});
  parameters.push_back({"block.mystery", plain, ParameterSpec::replicated(plain)});
  const std::string message = error_of<Error>([&] { init_spectral_mup(parameters, 1); });
  EXPECT_NE(message.find("model.init_method.use_mup: parameter 'block.mystery' declares no role"), std::string::npos)
      << message;
}

// ---- what the model plugins declare -----------------------------------------------------------

triax_model_context one_rank_context(int32_t blocks, const char* init_method) {
  triax_model_context context{};
  context.struct_size = sizeof(context);
  context.tp_size = context.pp_size = context.dp_size = 1;
  context.first_block = 0;
  context.last_block = blocks;
  context.device = "cpu";
  context.dtype = "float32";
  context.seed = 3;
  context.init_method_yaml = init_method;
  context.make_vocab_size_divisible_by = 1;
  return context;
}

const char* kLlamaYaml =
    "{vocab_size: 256, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4,"
    " num_key_value_heads: 2, max_position_embeddings: 32, tie_word_embeddings: false}";

std::map<std::string, const NamedParameter*> by_name(const ModelInstance& model) {
  std::map<std::string, const NamedParameter*> out;
  for (const NamedParameter& p : model.parameters()) out[p.name] = &p;
  return out;
}

double std_of(const at::Tensor& t) { return t.to(at::kDouble).std().item<double>(); }

TEST(SpectralMupModels, LlamaDeclaresEveryScaleThroughTheAbi) {
  ModelInstance model(testing::test_plugin_registry().model("llama"), "llama", kLlamaYaml,
                      one_rank_context(4, "{use_mup: true}"));
  auto p = by_name(model);
  // hidden 64, q 64, kv 2 x 16 = 32, ffn 128, vocab 256: lr_scale = fan_out / fan_in; the fused
  // q/k/v (64 + 32 + 32) and gate/up (2 x 128) count as their widest part: q (64), gate (128).
  const std::map<std::string, double> expected_lr = {
      {"model.embed_tokens.weight", 1.0},
      {"model.layers.0.self_attn.qkv_proj.weight", 1.0},
      {"model.layers.0.self_attn.o_proj.weight", 1.0},
      {"model.layers.1.mlp.gate_up_proj.weight", 2.0},
      {"model.layers.1.mlp.down_proj.weight", 0.5},
      {"model.layers.1.input_layernorm.weight", 1.0},
      {"model.norm.weight", 1.0},
      {"lm_head.weight", 4.0}};
  for (const auto& [name, lr_scale] : expected_lr) {
    ASSERT_TRUE(p.count(name)) << name;
    EXPECT_DOUBLE_EQ(p[name]->spec.lr_scale, lr_scale) << name;
  }
  // Initial scales (sample std within 5%): sigma = min(1, sqrt(fan_out/fan_in)) / sqrt(fan_in).
  EXPECT_NEAR(std_of(p["model.embed_tokens.weight"]->tensor), 1.0, 0.05);
  EXPECT_NEAR(std_of(p["model.layers.0.self_attn.qkv_proj.weight"]->tensor), 1.0 / 8.0, 0.05 / 8.0);
  EXPECT_NEAR(std_of(p["model.layers.0.self_attn.o_proj.weight"]->tensor), 1.0 / 8.0, 0.05 / 8.0);
  EXPECT_NEAR(std_of(p["model.layers.1.mlp.down_proj.weight"]->tensor), std::sqrt(0.5) / std::sqrt(128.0), 0.005);
  EXPECT_NEAR(std_of(p["lm_head.weight"]->tensor), 1.0 / 8.0, 0.05 / 8.0);
  EXPECT_TRUE(at::all(p["model.norm.weight"]->tensor == 1.0).item<bool>());
}

TEST(SpectralMupModels, StandardInitialisationKeepsOneLearningRate) {
  ModelInstance model(testing::test_plugin_registry().model("llama"), "llama", kLlamaYaml,
                      one_rank_context(4, "{std: 0.02, use_mup: false}"));
  for (const NamedParameter& p : model.parameters()) EXPECT_DOUBLE_EQ(p.spec.lr_scale, 1.0) << p.name;
  EXPECT_NEAR(std_of(by_name(model)["model.layers.0.self_attn.qkv_proj.weight"]->tensor), 0.02, 0.002);
}

TEST(SpectralMupModels, MoeDeclaresItsRouterExpertsAndSharedGate) {
  const char* yaml =
      "{vocab_size: 128, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 4,"
      " num_key_value_heads: 2, max_position_embeddings: 32, tie_word_embeddings: true,"
      " moe_config: {num_experts: 4, top_k: 2, moe_intermediate_size: 16, enable_shared_expert: true,"
      " shared_expert_intermediate_size: 16}}";
  ModelInstance model(testing::test_plugin_registry().model("moe"), "moe", yaml,
                      one_rank_context(3, "{use_mup: true}"));
  auto p = by_name(model);
  const std::map<std::string, double> expected_lr = {
      {"model.embed_tokens.weight", 1.0},  // tied: the embedding's rule
      {"model.layers.0.mlp.gate.weight", 4.0 / 32.0},
      {"model.layers.0.mlp.experts.gate_proj", 16.0 / 32.0},
      {"model.layers.0.mlp.experts.down_proj", 32.0 / 16.0},
      {"model.layers.0.mlp.shared_expert.gate_up_proj.weight", 16.0 / 32.0},
      {"model.layers.0.mlp.shared_expert_gate.weight", 1.0 / 32.0}};
  for (const auto& [name, lr_scale] : expected_lr) {
    ASSERT_TRUE(p.count(name)) << name;
    EXPECT_DOUBLE_EQ(p[name]->spec.lr_scale, lr_scale) << name;
  }
  // Each [out, in] expert matrix of the stack: sigma = min(1, sqrt(16/32)) / sqrt(32).
  EXPECT_NEAR(std_of(p["model.layers.0.mlp.experts.gate_proj"]->tensor), std::sqrt(0.5) / std::sqrt(32.0), 0.01);
}

// ---- refusals -------------------------------------------------------------------------------------

TEST(SpectralMupRefusals, APluginWithoutSupportIsRefusedByNameAndKey) {
  const char* mamba_yaml = "{d_model: 32, num_hidden_layers: 1, vocab_size: 64, ssm_cfg: {d_state: 4}}";
  const std::string message = error_of<PluginError>([&] {
    ModelInstance model(testing::test_plugin_registry().model("mamba"), "mamba", mamba_yaml,
                        one_rank_context(3, "{use_mup: true}"));
  });
  EXPECT_NE(message.find("model.init_method.use_mup: model plugin 'mamba' does not support spectral muP"),
            std::string::npos)
      << message;

  // A plugin built before ABI 1.5: its table ends before `capabilities`, which the host never reads.
  triax_model_vtable old = testing::test_plugin_registry().model("llama");
  old.struct_size = offsetof(triax_model_vtable, capabilities);
  const std::string old_message = error_of<PluginError>(
      [&] { ModelInstance model(old, "llama_1_4", kLlamaYaml, one_rank_context(4, "{use_mup: true}")); });
  EXPECT_NE(old_message.find("model plugin 'llama_1_4' does not support"), std::string::npos) << old_message;
}

TEST(SpectralMupRefusals, StdDoesNotApplyBesideUseMup) {
  const std::string message = error_of<ConfigError>([&] {
    ModelInstance model(testing::test_plugin_registry().model("llama"), "llama", kLlamaYaml,
                        one_rank_context(4, "{use_mup: true, std: 0.02}"));
  });
  EXPECT_NE(message.find("model.init_method.std: does not apply with use_mup: true"), std::string::npos) << message;
}

// ---- the optimizers apply the scales ------------------------------------------------------------

// One AdamW step from zero with gradient 1 moves every element by lr x lr_scale (Adam's first step
// is the sign of the gradient at full learning rate, bias-corrected).
std::vector<double> first_step_moves(const std::string& optimizer, const double* lr_scales) {
  std::vector<at::Tensor> params = {at::zeros({6}), at::zeros({6})};
  std::vector<triax_optimizer_param> entries;
  for (size_t i = 0; i < params.size(); ++i)
    entries.push_back({i == 0 ? "a" : "b", borrow_handle(params[i]), 0.0, 0});
  const std::string yaml = "{optimizer_factory: {name: adamW, adam_eps: 1.0e-12}}";
  triax_optimizer_context context{};
  context.struct_size = sizeof(context);
  context.dp_size = 1;
  context.optimizer_yaml = yaml.c_str();
  context.lr_scales = lr_scales;
  OptimizerInstance instance(testing::test_plugin_registry().optimizer(optimizer), optimizer, context, entries);
  instance.step({at::ones({6}), at::ones({6})}, 0.1);
  return {-params[0].mean().item<double>(), -params[1].mean().item<double>()};
}

TEST(SpectralMupOptimizers, AdamwAndZero1ApplyEachParametersScale) {
  const double scales[] = {1.0, 0.25};
  for (const std::string optimizer : {"adamw", "zero1_adamw"}) {
    std::vector<double> moves = first_step_moves(optimizer, scales);
    EXPECT_NEAR(moves[0], 0.1, 1e-6) << optimizer;
    EXPECT_NEAR(moves[1], 0.025, 1e-6) << optimizer;
    std::vector<double> unscaled = first_step_moves(optimizer, nullptr);  // NULL: every scale 1
    EXPECT_NEAR(unscaled[1], 0.1, 1e-6) << optimizer;
  }
  const double bad[] = {1.0, 0.0};
  const std::string message = error_of<Error>([&] { first_step_moves("adamw", bad); });
  EXPECT_NE(message.find("parameter 'b': learning-rate scale 0.000000 is not a positive finite number"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace triax
