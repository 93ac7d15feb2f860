// The whole Llama model: its loss against the reference, finite-difference gradients in float64,
// parameter names, shapes and counts, initialisation, FLOPs and block costs, pipeline stages
// composing to the whole model, training in bfloat16.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "llama_test_support.hpp"

namespace {

using namespace llama_test;

TEST(LlamaModel, LossMatchesReference) {
  for (bool tied : {false, true}) {
    auto model = build(tiny_yaml(tied), make_context(2, at::kDouble, "{std: 0.2}"));
    Batch b = make_batch(2, 8, 30, 31);
    triax::StageOutput out = model->forward(stage_input(b));
    ASSERT_TRUE(out.loss.defined());
    EXPECT_FALSE(out.hidden_out.defined());
    EXPECT_EQ(out.loss.dim(), 0);
    at::Tensor expected = ref_loss(parameters_by_name(*model), model->config(), b.ids, b.labels, b.mask);
    EXPECT_NEAR(out.loss.item<double>(), expected.item<double>(), 1e-6 * expected.item<double>()) << "tied " << tied;
  }
}

TEST(LlamaModel, FiniteDifferenceGradientsInDouble) {
  for (bool tied : {false, true}) {
    auto model = build(tiny_yaml(tied), make_context(2, at::kDouble, "{std: 0.2}"));
    Batch b = make_batch(2, 8, 30, 41);
    triax::StageInput in = stage_input(b);
    at::Tensor loss = model->forward(in).loss;
    ASSERT_EQ(loss.scalar_type(), at::kDouble);
    loss.backward();

    auto params = parameters_by_name(*model);
    std::vector<std::string> checked = {"model.embed_tokens.weight",
                                        "model.layers.0.self_attn.qkv_proj.weight",
                                        "model.layers.1.self_attn.qkv_proj.weight",
                                        "model.layers.0.mlp.gate_up_proj.weight",
                                        "model.layers.1.mlp.down_proj.weight",
                                        "model.layers.0.input_layernorm.weight",
                                        "model.norm.weight"};
    if (!tied) checked.push_back("lm_head.weight");
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(42);
    const double step = 1e-5;
    for (const std::string& name : checked) {
      at::Tensor p = params.at(name);
      ASSERT_TRUE(p.grad().defined()) << name;
      at::Tensor flat = p.detach().view({-1});
      at::Tensor grad = p.grad().view({-1});
      std::vector<int64_t> entries;
      at::Tensor picks = at::randint(flat.numel(), {5}, g, at::kLong);
      for (int64_t i = 0; i < 5; ++i) entries.push_back(picks[i].item<int64_t>());
      if (name == "model.embed_tokens.weight") entries.push_back(b.ids[0][1].item<int64_t>() * 16 + 3);  // a used row
      std::vector<double> analytic, numeric;
      for (int64_t e : entries) {
        at::NoGradGuard guard;
        double* value = flat.data_ptr<double>() + e;
        const double original = *value;
        *value = original + step;
        const double up = model->forward(in).loss.item<double>();
        *value = original - step;
        const double down = model->forward(in).loss.item<double>();
        *value = original;
        numeric.push_back((up - down) / (2.0 * step));
        analytic.push_back(grad[e].item<double>());
      }
      double diff2 = 0.0, ref2 = 0.0, ref_max = 0.0, diff_max = 0.0;
      for (size_t i = 0; i < entries.size(); ++i) {
        const double d = analytic[i] - numeric[i];
        diff2 += d * d;
        ref2 += numeric[i] * numeric[i];
        ref_max = std::max(ref_max, std::abs(numeric[i]));
        diff_max = std::max(diff_max, std::abs(d));
      }
      ASSERT_GT(ref_max, 1e-8) << name << ": sampled gradients are all zero";
      EXPECT_LE(std::sqrt(diff2 / ref2), 1e-6) << name << " (tied " << tied << ")";
      EXPECT_LE(diff_max, 1e-6 * ref_max) << name << " (tied " << tied << ")";
    }
  }
}

TEST(LlamaModel, ParameterNamesShapesAndCounts) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> layer = {
      // q/k/v per kv head: its 2 query heads, its key and value head, of 4 each.
      {"self_attn.qkv_proj.weight", {2, 16, 16}}, {"self_attn.o_proj.weight", {16, 16}},
      {"mlp.gate_up_proj.weight", {2, 24, 16}},   {"mlp.down_proj.weight", {16, 24}},
      {"input_layernorm.weight", {16}},           {"post_attention_layernorm.weight", {16}}};
  for (bool tied : {false, true}) {
    auto model = build(tiny_yaml(tied), make_context(2, at::kFloat));
    std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {{"model.embed_tokens.weight", {32, 16}}};
    for (int l = 0; l < 2; ++l)
      for (const auto& [name, shape] : layer)
        expected.push_back({"model.layers." + std::to_string(l) + "." + name, shape});
    expected.push_back({"model.norm.weight", {16}});
    if (!tied) expected.push_back({"lm_head.weight", {32, 16}});

    const auto& table = model->parameter_table();
    ASSERT_EQ(table.size(), expected.size()) << "tied " << tied;
    int64_t numel = 0;
    for (size_t i = 0; i < table.size(); ++i) {
      EXPECT_EQ(table[i].name, expected[i].first);
      EXPECT_EQ(table[i].tensor.sizes().vec(), expected[i].second) << table[i].name;
      EXPECT_EQ(table[i].spec.global_shape, expected[i].second) << table[i].name;
      EXPECT_EQ(table[i].tensor.scalar_type(), at::kFloat);
      EXPECT_EQ(table[i].spec.flags & TRIAX_PARAM_TIED, 0u) << table[i].name;
      numel += table[i].tensor.numel();
    }
    const int64_t per_layer = 16 * 16 + 2 * 8 * 16 + 16 * 16 + 3 * 16 * 24 + 2 * 16;
    const int64_t expected_total = 32 * 16 + 2 * per_layer + 16 + (tied ? 0 : 32 * 16);
    EXPECT_EQ(numel, expected_total);
    EXPECT_EQ(model->total_parameters(), expected_total);
  }
}

TEST(LlamaModel, InitialisationFollowsInitMethod) {
  // Big enough for the sample std to be meaningful: 4 layers, hidden 64.
  const std::string yaml =
      "hidden_size: 64\nnum_attention_heads: 4\nintermediate_size: 128\nnum_hidden_layers: 8\nvocab_size: 256\n"
      "max_position_embeddings: 8\ninitializer_range: 0.05\n";
  auto check = [&](const std::string& init, double std) {
    auto model = build(yaml, make_context(8, at::kFloat, init));
    auto p = parameters_by_name(*model);
    const double out_std = std / std::sqrt(16.0);
    EXPECT_NEAR(p.at("model.embed_tokens.weight").std().item<double>(), std, 0.05 * std);
    EXPECT_NEAR(p.at("model.layers.3.self_attn.qkv_proj.weight").std().item<double>(), std, 0.05 * std);
    EXPECT_NEAR(p.at("model.layers.3.self_attn.o_proj.weight").std().item<double>(), out_std, 0.05 * out_std);
    EXPECT_NEAR(p.at("model.layers.3.mlp.down_proj.weight").std().item<double>(), out_std, 0.05 * out_std);
    EXPECT_EQ(p.at("model.layers.3.input_layernorm.weight").min().item<double>(), 1.0);
    EXPECT_EQ(p.at("model.norm.weight").max().item<double>(), 1.0);
  };
  check("{std: 0.02}", 0.02);
  check("{}", 0.05);  // initializer_range
  // Same seed and name, same values.
  auto a = build(yaml, make_context(8, at::kFloat));
  auto b = build(yaml, make_context(8, at::kFloat));
  EXPECT_TRUE(at::equal(parameters_by_name(*a).at("lm_head.weight"), parameters_by_name(*b).at("lm_head.weight")));
}

TEST(LlamaModel, FlopsAndBlockCosts) {
  // h 16, q 16, kv 8, ffn 24, V 30, L 2, seq 8:
  // proj = 16*(16+2*8) + 16*16 = 768, mlp = 3*16*24 = 1152, attn = 2*8*16 = 256
  // forward = 2*2*(768+1152) + 2*2*256 + 2*16*30 = 7680 + 1024 + 960 = 9664; training = 3x.
  auto model = build(tiny_yaml(false), make_context(2, at::kFloat));
  EXPECT_DOUBLE_EQ(model->flops_per_token(8), 28992.0);
  ConfigReader reader = ConfigReader::from_text(tiny_yaml(false), "model.model_config");
  std::vector<double> costs = LlamaModel::block_costs(reader, 8);
  ASSERT_EQ(costs.size(), 4u);  // L + 2
  EXPECT_DOUBLE_EQ(costs[0], 0.0);
  EXPECT_DOUBLE_EQ(costs[1], 4352.0);
  EXPECT_DOUBLE_EQ(costs[2], 4352.0);
  EXPECT_DOUBLE_EQ(costs[3], 960.0);
  // SmolLM-135M shape against the peer benchmark's formula, evaluated by hand:
  // h 576, 9 heads of 64, 3 kv heads, ffn 1536, L 30, V 49152, seq 2048.
  auto smol = std::string(
      "hidden_size: 576\nnum_attention_heads: 9\nnum_key_value_heads: 3\nintermediate_size: 1536\n"
      "num_hidden_layers: 30\nvocab_size: 49152\nmax_position_embeddings: 2048\n");
  ConfigReader smol_reader = ConfigReader::from_text(smol, "model.model_config");
  std::vector<double> smol_costs = LlamaModel::block_costs(smol_reader, 2048);
  double forward = 0.0;
  for (double c : smol_costs) forward += c;
  const double proj = 576.0 * (576 + 2 * 192) + 576.0 * 576, mlp = 3.0 * 576 * 1536, attn = 2.0 * 2048 * 576;
  EXPECT_DOUBLE_EQ(forward, 2 * 30 * (proj + mlp) + 2 * 30 * attn + 2.0 * 576 * 49152);
}

TEST(LlamaModel, PipelineStagesComposeToTheWholeModel) {
  for (bool tied : {false, true}) {
    auto whole = build(tiny_yaml(tied), make_context(2, at::kDouble));
    ModelContext first = make_context(2, at::kDouble);
    first.pp_size = 2;
    first.last_block = 2;  // embedding + layer 0
    ModelContext second = make_context(2, at::kDouble);
    second.pp_rank = 1;
    second.pp_size = 2;
    second.first_block = 2;  // layer 1 + head
    auto stage0 = build(tiny_yaml(tied), first);
    auto stage1 = build(tiny_yaml(tied), second);

    Batch b = make_batch(2, 8, 30, 51);
    triax::StageOutput out0 = stage0->forward(stage_input(b));
    ASSERT_TRUE(out0.hidden_out.defined());
    EXPECT_FALSE(out0.loss.defined());
    EXPECT_EQ(out0.hidden_out.sizes(), (std::vector<int64_t>{2, 8, 16}));
    triax::StageInput in1 = stage_input(b);
    in1.hidden_in = out0.hidden_out;
    at::Tensor loss = stage1->forward(in1).loss;
    EXPECT_NEAR(loss.item<double>(), whole->forward(stage_input(b)).loss.item<double>(), 1e-12);

    std::vector<std::string> names0, names1;
    for (const auto& p : stage0->parameter_table()) names0.push_back(p.name);
    for (const auto& p : stage1->parameter_table()) names1.push_back(p.name);
    EXPECT_EQ(names0.front(), "model.embed_tokens.weight");
    EXPECT_EQ(names0.back(), "model.layers.0.post_attention_layernorm.weight");
    EXPECT_EQ(names1.front(), tied ? "model.embed_tokens.weight" : "model.layers.1.self_attn.qkv_proj.weight");
    EXPECT_EQ(names1.back(), tied ? "model.norm.weight" : "lm_head.weight");
    if (tied) {
      // Both stages hold a copy, flagged as one logical parameter, with equal values.
      const auto& e0 = stage0->parameter_table().front();
      const auto& e1 = stage1->parameter_table().front();
      EXPECT_NE(e0.spec.flags & TRIAX_PARAM_TIED, 0u);
      EXPECT_NE(e1.spec.flags & TRIAX_PARAM_TIED, 0u);
      EXPECT_EQ(e0.spec.tied_key, "model.embed_tokens.weight");
      EXPECT_EQ(e1.spec.tied_key, "model.embed_tokens.weight");
      EXPECT_TRUE(at::equal(e0.tensor, e1.tensor));
      EXPECT_FALSE(e0.tensor.is_same(e1.tensor));
    }
  }
}

TEST(LlamaModel, TrainsInBfloat16) {
  auto model = build(tiny_yaml(true), make_context(2, at::kBFloat16));
  Batch b = make_batch(2, 8, 30, 61);
  at::Tensor loss = model->forward(stage_input(b)).loss;
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  EXPECT_NEAR(loss.item<double>(), std::log(30.0), 0.2);  // std 0.02: nearly uniform
  loss.backward();
  for (const auto& p : model->parameter_table()) {
    ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
    EXPECT_TRUE(at::isfinite(p.tensor.grad()).all().item<bool>()) << p.name;
  }
}

}  // namespace
