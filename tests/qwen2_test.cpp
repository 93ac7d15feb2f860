// The qwen2 plugin's model and the SDK features it turns on, in one process on the CPU:
//   - a Qwen2 config (nanotron's example) resolves, saying what each implementation hint does;
//   - Qwen2's attention_bias: q/k/v biases, none on o_proj (Llama's: all four);
//   - NoPE layers and GPT-J rotary pairs against attention written out by hand;
//   - the z-loss of the fused lm_head + cross-entropy against logits computed in full.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "llama_test_support.hpp"
#include "qwen2_model.hpp"
#include "triax/layers/fused_linear_cross_entropy.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/rotary_embedding.hpp"

namespace {

using namespace llama_test;
using triax::qwen2::Qwen2Model;

std::shared_ptr<Qwen2Model> build_qwen2(const std::string& yaml, const ModelContext& context) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return Qwen2Model::create(reader, context);
}

std::string error_of(const std::string& yaml) {
  try {
    build_qwen2(yaml, make_context(2, at::kFloat));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Qwen2, NanotronExampleResolvesWithItsHints) {
  std::ifstream file(TRIAX_TEST_DATA_DIR "/nanotron_config_qwen.yaml");
  std::stringstream text;
  text << file.rdbuf();
  YAML::Node model_config = YAML::Load(text.str())["model"]["model_config"];
  ConfigReader reader(model_config, "model.model_config");
  const triax::llama::LlamaConfig c = triax::qwen2::read_qwen2_config(reader);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_FALSE(c.output_bias());
  // sequence_length 8192 over max_position_embeddings 256: the rotary tables extend.
  EXPECT_NO_THROW(c.check_sequence_fits(reader, 8192));
  const YAML::Node hints = reader.resolved()["_implementation_hints"];
  ASSERT_TRUE(hints.IsMap()) << YAML::Dump(reader.resolved());
  EXPECT_EQ(hints["interleaved_rotary"].as<std::string>().rfind("honoured", 0), 0u);
  EXPECT_EQ(hints["_attn_implementation"].as<std::string>().rfind("no effect", 0), 0u);
  // The resolved config reads back to the same config.
  ConfigReader again(YAML::Clone(reader.resolved()), "model.model_config");
  EXPECT_EQ(triax::qwen2::read_qwen2_config(again).hidden_size, 256);
}

TEST(Qwen2, AttentionBiasIsOnQkvOnly) {
  auto qwen2 = build_qwen2(tiny_yaml(false, "attention_bias: true\n"), make_context(2, at::kFloat));
  std::map<std::string, at::Tensor> p;
  for (const auto& entry : qwen2->parameter_table()) p[entry.name] = entry.tensor;
  EXPECT_EQ(p.count("model.layers.0.self_attn.qkv_proj.bias"), 1u);
  EXPECT_EQ(p.count("model.layers.0.self_attn.o_proj.bias"), 0u);
  int64_t numel = 0;
  for (const auto& entry : qwen2->parameter_table()) numel += entry.tensor.numel();
  EXPECT_EQ(numel, qwen2->total_parameters());
}

TEST(Qwen2, BadKeysAreNamed) {
  EXPECT_NE(error_of(tiny_yaml(false, "no_rope_layer: -1\n")).find("model.model_config.no_rope_layer: must be a positive"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_yaml(false, "no_rope_layer: 3\n")).find("model.model_config.no_rope_layer: 3 is more than"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_yaml(false, "moe_config: {num_experts: 4}\n")).find("model.model_config.moe_config"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_yaml(false, "interleaved_rotary: true\nrope_interleaved: false\n"))
                .find("model.model_config.interleaved_rotary: true disagrees with rope_interleaved false"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_yaml(false, "flex_attention_mask: document\n"))
                .find("model.model_config.flex_attention_mask: 'document' is not implemented"),
            std::string::npos);
  EXPECT_NE(error_of(tiny_yaml(false, "is_llama_config: true\n")).find("model.model_config.is_llama_config: unknown key"),
            std::string::npos);
}

// Attention written out: separate projections, GPT-J pairs (2i, 2i+1) rotated by position x
// theta^(-2i/d), or no rotation; each query head reads key/value head (head / group).
at::Tensor reference_attention(const at::Tensor& x, triax::GroupedQueryAttention& attention,
                               const triax::AttentionShape& shape) {
  const triax::QkvLayout layout = triax::QkvLayout::of(shape);
  const int64_t d = layout.head_dim, seq = x.size(1);
  const auto [wq, wk, wv] = layout.split(attention.qkv_proj->weight.detach());
  const auto [bq, bk, bv] = layout.split(attention.qkv_proj->bias.detach());
  auto heads = [&](const at::Tensor& w, const at::Tensor& b, int64_t n) {
    return (at::matmul(x, w.t()) + b).view({1, seq, n, d}).transpose(1, 2);  // [1, n, seq, d]
  };
  at::Tensor q = heads(wq, bq, shape.heads), k = heads(wk, bk, shape.kv_heads), v = heads(wv, bv, shape.kv_heads);
  if (shape.rotary) {
    const at::Tensor i = at::arange(d / 2, at::kDouble);
    const at::Tensor angle = at::outer(at::arange(seq, at::kDouble), at::pow(10000.0, -2.0 * i / d));  // [seq, d/2]
    auto rotate_pairs = [&](const at::Tensor& t) {
      const at::Tensor even = t.slice(-1, 0, d, 2), odd = t.slice(-1, 1, d, 2);
      return at::stack({even * angle.cos() - odd * angle.sin(), odd * angle.cos() + even * angle.sin()}, -1)
          .flatten(-2);
    };
    q = rotate_pairs(q);
    k = rotate_pairs(k);
  }
  k = k.repeat_interleave(layout.group(), 1);
  v = v.repeat_interleave(layout.group(), 1);
  const at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  const at::Tensor causal = at::ones({seq, seq}, at::kBool).triu(1);
  const at::Tensor out = at::matmul(scores.masked_fill(causal, -INFINITY).softmax(-1), v);
  return at::matmul(out.transpose(1, 2).reshape({1, seq, -1}), attention.o_proj->weight.detach().t());
}

TEST(Qwen2, GptjPairsAndNopeLayersMatchAttentionWrittenOut) {
  for (const bool rotary : {true, false}) {
    triax::AttentionShape shape;
    shape.hidden_size = 32;
    shape.heads = 4;
    shape.kv_heads = 2;
    shape.qkv_bias = true;
    shape.output_bias = false;
    shape.rotary = rotary;
    shape.rope_interleaved = true;
    triax::GroupedQueryAttention attention(shape, make_context(1, at::kDouble));
    torch::NoGradGuard no_grad;
    fill_normal(attention.qkv_proj->weight, 0.3, 1);
    fill_normal(attention.qkv_proj->bias, 0.3, 2);
    fill_normal(attention.o_proj->weight, 0.3, 3);
    at::Tensor x = at::empty({1, 8, 32}, at::kDouble);
    fill_normal(x, 1.0, 4);
    triax::RotaryEmbedding rope(triax::RopeOptions{8, 10000.0, 16, std::nullopt}, c10::Device(c10::kCPU));
    const auto [cos, sin] = rope.tables(8, at::kDouble);
    const at::Tensor ours = attention.forward(x, cos, sin);
    // The rotary tables are fp32 (as transformers computes them), the reference's angles fp64.
    EXPECT_LT(max_abs_diff(ours, reference_attention(x, attention, shape)), rotary ? 1e-5 : 1e-12) << "rotary " << rotary;
  }
}

TEST(Qwen2, ZLossOfTheFusedHeadMatchesFullLogits) {
  const int64_t tokens = 12, hidden = 8, vocab = 20;
  at::Tensor h = at::randn({tokens, hidden}, at::kDouble).requires_grad_();
  at::Tensor w = at::randn({vocab, hidden}, at::kDouble).requires_grad_();
  const at::Tensor labels = at::randint(0, vocab, {tokens}, at::kLong);
  const at::Tensor mask = at::ones({tokens}, at::kDouble).index_put_({at::indexing::Slice(0, 3)}, 0.0);
  const double coefficient = 0.01;
  auto total = [&](const at::Tensor& loss, const at::Tensor& lse) {
    return loss + coefficient * (lse.square() * mask).sum() / mask.sum();
  };
  const triax::LossAndLogsumexp fused = triax::fused_linear_cross_entropy_with_logsumexp(
      h, w, labels, mask, 0, vocab, triax::TensorParallel{}, /*chunk_tokens=*/5);
  const at::Tensor ours = total(fused.loss, fused.logsumexp);
  const auto ours_grads = torch::autograd::grad({ours}, {h, w});

  const at::Tensor logits = at::matmul(h, w.t());
  const at::Tensor per_token = at::cross_entropy_loss(logits, labels, {}, at::Reduction::None);
  const at::Tensor expected = total((per_token * mask).sum() / mask.sum(), logits.logsumexp(-1));
  const auto expected_grads = torch::autograd::grad({expected}, {h, w});
  EXPECT_LT(max_abs_diff(fused.logsumexp, logits.logsumexp(-1)), 1e-12);
  EXPECT_LT(max_abs_diff(ours, expected), 1e-12);
  EXPECT_LT(max_abs_diff(ours_grads[0], expected_grads[0]), 1e-12);
  EXPECT_LT(max_abs_diff(ours_grads[1], expected_grads[1]), 1e-12);
}

}  // namespace
