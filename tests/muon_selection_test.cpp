// Which parameters take Muon (by shape and name), the refusals of a parameter forced onto Muon
// that it cannot orthogonalise, the settings' refusals naming their key, and the tensor-parallel
// layouts Muon puts back together.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "error_of.hpp"
#include "muon_selection.hpp"
#include "muon_settings.hpp"
#include "muon_update.hpp"
#include "triax/error.hpp"

namespace triax::plugins {
namespace {

using test::error_of;

MuonSettings settings(const std::string& factory) {
  return MuonSettings::read(YAML::Load("optimizer_factory: " + factory));
}

OptimizerParam parameter(const std::string& name, std::vector<int64_t> shape,
                         triax_group group = TRIAX_GROUP_DP) {
  OptimizerParam p;
  p.name = name;
  p.param = at::zeros(shape);
  p.global_shape = shape;
  p.shard_offset.assign(shape.size(), 0);
  p.gradient_group = group;
  return p;
}

std::vector<OptimizerParam> moe_layer() {
  return {parameter("model.embed_tokens.weight", {64, 32}),
          parameter("model.layers.0.input_layernorm.weight", {32}),
          parameter("model.layers.0.self_attn.qkv_proj.weight", {2, 32, 32}),
          parameter("model.layers.0.self_attn.qkv_proj.bias", {2, 32}),
          parameter("model.layers.0.self_attn.o_proj.weight", {32, 32}),
          parameter("model.layers.0.mlp.gate.weight", {4, 32}),
          parameter("model.layers.0.mlp.experts.gate_proj", {4, 24, 32}, TRIAX_GROUP_EDP),
          parameter("model.layers.0.mlp.shared_expert_gate.weight", {1, 32}),
          parameter("lm_head.weight", {64, 32})};
}

TEST(MuonSelection, HiddenMatricesTakeMuonTheRestAdamW) {
  const std::vector<OptimizerParam> params = moe_layer();
  const std::vector<OptimizerChoice> choices = choose_optimizers(params, settings("{name: muon}"));
  std::vector<bool> muon;
  for (const OptimizerChoice& c : choices) muon.push_back(c.muon);
  EXPECT_EQ(muon, (std::vector<bool>{false, false, true, false, true, false, true, false, false}));
  EXPECT_EQ(choices[0].reason, "named in adamw_named_params ('.*embed')");
  EXPECT_EQ(choices[1].reason, "1-D");
  EXPECT_EQ(choices[5].reason, "named in adamw_named_params ('.*\\.gate\\.weight')");
  EXPECT_EQ(choices[6].reason, "expert matrices");
  EXPECT_EQ(choices[7].reason, "a vector stored as a matrix");
  // A fused projection is the one matrix its layer multiplies; experts one matrix each.
  EXPECT_EQ(matrix_view(params[2])->rows, 64);
  EXPECT_EQ(matrix_view(params[6])->count, 4);
  EXPECT_EQ(matrix_view(params[6])->rows, 24);
  const std::vector<std::string> lines = describe_choices(params, choices);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), "Muon for 2 tensors, a matrix: model.layers.*.self_attn.o_proj.weight, "
                           "model.layers.*.self_attn.qkv_proj.weight");
}

TEST(MuonSelection, ANameForcesMuonOrIsRefusedNamingTheParameterAndTheKey) {
  const std::vector<OptimizerParam> params = moe_layer();
  EXPECT_TRUE(choose_optimizers(params, settings("{name: muon, muon_named_params: [lm_head]}"))[8].muon);
  const std::string vector = error_of<ConfigError>(
      [&] { choose_optimizers(params, settings("{name: muon, muon_named_params: ['.*layernorm']}")); });
  EXPECT_NE(vector.find("optimizer.optimizer_factory.muon_named_params"), std::string::npos) << vector;
  EXPECT_NE(vector.find("model.layers.0.input_layernorm.weight of shape [32]"), std::string::npos) << vector;
  EXPECT_NE(vector.find("1-D, not a matrix"), std::string::npos) << vector;
  const std::string large = error_of<ConfigError>([&] {
    choose_optimizers(params, settings("{name: muon, muon_named_params: [lm_head], max_muon_matrix_elements: 1000}"));
  });
  EXPECT_NE(large.find("lm_head.weight of shape [64, 32]"), std::string::npos) << large;
  EXPECT_NE(large.find("exceeds max_muon_matrix_elements (1000)"), std::string::npos) << large;
  // Unforced, a matrix over the limit takes AdamW.
  const std::vector<OptimizerChoice> limited =
      choose_optimizers(params, settings("{name: muon, max_muon_matrix_elements: 1000}"));
  EXPECT_FALSE(limited[2].muon);
  EXPECT_EQ(limited[2].reason, "larger than max_muon_matrix_elements");
}

TEST(MuonSettings, RefusalsNameTheirKey) {
  auto refusal = [](const std::string& factory) { return error_of<ConfigError>([&] { settings(factory); }); };
  EXPECT_NE(refusal("{name: muon, ns_coefficients: polar}").find("optimizer.optimizer_factory.ns_coefficients"),
            std::string::npos);
  const std::string momentum = refusal("{name: muon, momentum: -0.5}");
  EXPECT_NE(momentum.find("optimizer.optimizer_factory.momentum"), std::string::npos) << momentum;
  EXPECT_NE(momentum.find("expected a value in [0, 1), got -0.5"), std::string::npos) << momentum;
  EXPECT_NE(refusal("{name: muon, ns_steps: 0}").find("ns_steps"), std::string::npos);
  EXPECT_NE(refusal("{name: muon, update_rms: 0}").find("update_rms"), std::string::npos);
  EXPECT_NE(refusal("{name: muon, qk_clip_threshold: -1}").find("qk_clip_threshold"), std::string::npos);
  EXPECT_NE(refusal("{name: muon, adamw_named_params: ['(']}").find("adamw_named_params.0"), std::string::npos);
  EXPECT_NE(refusal("{name: muon, momentun: 0.9}").find("momentun"), std::string::npos);
  const YAML::Node resolved = YAML::Load(settings("{name: Muon}").resolved_yaml());
  EXPECT_EQ(resolved["name"].as<std::string>(), "Muon");
  EXPECT_EQ(resolved["ns_coefficients"].as<std::string>(), "quintic");
  EXPECT_DOUBLE_EQ(resolved["update_rms"].as<double>(), 0.2);
  EXPECT_TRUE(resolved["qk_clip_threshold"].IsNull());
}

TEST(MuonLayout, ColumnAndRowShardsAndExpertsAreToldApart) {
  OptimizerParam column = parameter("qkv_proj.weight", {2, 16, 32});
  column.global_shape = {2, 32, 32};
  column.shard_offset = {0, 16, 0};
  EXPECT_EQ(tensor_parallel_split(column, 1, 2), 1);
  OptimizerParam row = parameter("o_proj.weight", {32, 16});
  row.global_shape = {32, 32};
  row.shard_offset = {0, 16};
  EXPECT_EQ(tensor_parallel_split(row, 1, 2), 1);
  row.shard_offset = {0, 0};  // rank 1 must hold the second half
  EXPECT_NE(error_of<Error>([&] { tensor_parallel_split(row, 1, 2); }).find("not cut into 2 equal shards"),
            std::string::npos);
  OptimizerParam experts = parameter("experts.up_proj", {2, 24, 32}, TRIAX_GROUP_EDP);
  experts.global_shape = {4, 24, 32};
  EXPECT_EQ(tensor_parallel_split(experts, 0, 2), -1);
  OptimizerParam twice = parameter("w", {16, 16});
  twice.global_shape = {32, 32};
  EXPECT_NE(error_of<Error>([&] { tensor_parallel_split(twice, 0, 2); }).find("more than one dimension"),
            std::string::npos);
}

}  // namespace
}  // namespace triax::plugins
