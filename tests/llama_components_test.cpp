// The Llama plugin's parts against the references of llama_test_support.hpp: RMSNorm, rotary
// embeddings (and Llama-3 frequency scaling), grouped-query attention and the SwiGLU MLP.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "llama_model.hpp"
#include "llama_test_support.hpp"
#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/rotary_embedding.hpp"
#include "triax/layers/swiglu_mlp.hpp"

namespace {

using namespace llama_test;
using triax::AttentionShape;

triax::AttentionShape attention_shape(const LlamaConfig& c) {
  return c.attention_shape(0);
}

TEST(LlamaComponents, RmsNormMatchesFormula) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    triax::RMSNorm norm(16, 1e-5, c10::Device(c10::kCPU), dtype);
    fill_normal(norm.weight, 1.0, 3);
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(4);
    at::Tensor x = (at::randn({2, 5, 16}, g) * 3.0).to(dtype);
    at::Tensor y = norm.forward(x);
    EXPECT_EQ(y.scalar_type(), dtype);
    at::Tensor expected = ref_rms_norm(x, norm.weight, 1e-5);
    // bf16: the normalised value and the product are each rounded to 8 significant bits.
    const double rtol = dtype == at::kFloat ? 1e-6 : 1e-2;
    EXPECT_TRUE(at::allclose(y.to(at::kDouble), expected, rtol, 1e-5)) << c10::toString(dtype);
  }
}

TEST(LlamaComponents, RotaryMatchesComplexRotation) {
  LlamaConfig c = read_config("hidden_size: 64\nnum_attention_heads: 2\nmax_position_embeddings: 16\n");
  ASSERT_EQ(c.head_dim(), 32);
  triax::RotaryEmbedding rope(c.rope(), c10::Device(c10::kCPU));
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor x = at::randn({2, 3, 16, 32}, g);
  auto [cos, sin] = rope.tables(16, at::kFloat);
  at::Tensor y = triax::apply_rotary(x, cos, sin);
  at::Tensor expected = ref_rope(x, ref_default_frequencies(10000.0, 32));
  EXPECT_LT(max_abs_diff(y, expected), 2e-5);
  // The first position is not rotated at all.
  EXPECT_EQ(max_abs_diff(y.select(2, 0), x.select(2, 0)), 0.0);
  EXPECT_THROW(rope.tables(17, at::kFloat), triax::Error);
}

TEST(LlamaComponents, Llama3FrequencyScaling) {
  LlamaConfig c = read_config(
      "hidden_size: 256\nnum_attention_heads: 2\nrope_theta: 500000.0\nmax_position_embeddings: 64\n"
      "rope_scaling: {rope_type: llama3, factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0,"
      " original_max_position_embeddings: 8192}\n");
  at::Tensor inv = triax::rope_inverse_frequencies(c.rope());
  ASSERT_EQ(inv.scalar_type(), at::kFloat);
  ASSERT_EQ(inv.numel(), 64);
  // The documented formula: wavelength 2*pi/f; below old/high_freq_factor unchanged, above
  // old/low_freq_factor divided by factor, in between (1 - s) f / factor + s f with
  // s = (old / wavelength - low) / (high - low).
  const double factor = 8.0, low = 1.0, high = 4.0, old = 8192.0;
  std::vector<double> base = ref_default_frequencies(500000.0, 128);
  int unchanged = 0, divided = 0, smoothed = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const double f = base[static_cast<size_t>(i)];
    const double wavelength = 2.0 * kPi / f;
    double expected;
    if (wavelength < old / high) {
      expected = f;
      ++unchanged;
    } else if (wavelength > old / low) {
      expected = f / factor;
      ++divided;
    } else {
      const double s = (old / wavelength - low) / (high - low);
      expected = (1.0 - s) * f / factor + s * f;
      ++smoothed;
    }
    EXPECT_NEAR(inv[i].item<double>(), expected, 5e-6 * expected) << "frequency " << i;
  }
  EXPECT_GT(unchanged, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);

  // linear scaling divides every frequency.
  LlamaConfig linear =
      read_config("hidden_size: 256\nnum_attention_heads: 2\nrope_scaling: {type: linear, factor: 4.0}\n");
  at::Tensor inv_linear = triax::rope_inverse_frequencies(linear.rope());
  std::vector<double> plain = ref_default_frequencies(10000.0, 128);
  for (int64_t i = 0; i < 64; ++i) {
    const double f = plain[static_cast<size_t>(i)];
    EXPECT_NEAR(inv_linear[i].item<double>(), f / 4.0, 5e-6 * f);
  }
}

// The fused q/k/v weight from separate q, k and v weights (QkvLayout).
void set_qkv(triax::GroupedQueryAttention& attention, const AttentionShape& shape, const at::Tensor& q,
             const at::Tensor& k, const at::Tensor& v) {
  at::NoGradGuard guard;
  attention.qkv_proj->weight.copy_(triax::QkvLayout::of(shape).fuse(q, k, v));
}

at::Tensor normal(std::vector<int64_t> shape, double std, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, g, at::kDouble) * std;
}

TEST(LlamaComponents, GroupedQueryAttentionMatchesExplicitSoftmax) {
  LlamaConfig c =
      read_config("hidden_size: 32\nnum_attention_heads: 4\nnum_key_value_heads: 2\nmax_position_embeddings: 16\n");
  ModelContext context = make_context(1, at::kDouble);
  const AttentionShape shape = attention_shape(c);
  triax::GroupedQueryAttention attention(shape, context);
  const at::Tensor wq = normal({32, 32}, 0.3, 11), wk = normal({16, 32}, 0.3, 12), wv = normal({16, 32}, 0.3, 13);
  set_qkv(attention, shape, wq, wk, wv);
  fill_normal(attention.o_proj->weight, 0.3, 14);
  // 2 kv heads of 8, each with its 2 query heads, key and value head.
  EXPECT_EQ(attention.qkv_proj->weight.sizes(), (std::vector<int64_t>{2, 32, 32}));
  triax::RotaryEmbedding rope(c.rope(), context.device);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(15);
  at::Tensor x = at::randn({2, 12, 32}, g, at::kDouble);
  auto [cos, sin] = rope.tables(12, at::kDouble);
  at::Tensor y = attention.forward(x, cos, sin);
  at::Tensor expected =
      ref_attention(x, wq, wk, wv, attention.o_proj->weight, 4, 2, ref_default_frequencies(10000.0, 8));
  ASSERT_EQ(y.sizes(), expected.sizes());
  // The cos/sin tables are fp32 (as in transformers): angles carry fp32 rounding.
  EXPECT_LT(max_abs_diff(y, expected), 1e-6);
  // fp32 module against the same reference
  ModelContext context32 = make_context(1, at::kFloat);
  triax::GroupedQueryAttention attention32(shape, context32);
  {
    at::NoGradGuard guard;
    attention32.qkv_proj->weight.copy_(attention.qkv_proj->weight);
    attention32.o_proj->weight.copy_(attention.o_proj->weight);
  }
  auto [cos32, sin32] = rope.tables(12, at::kFloat);
  EXPECT_LT(max_abs_diff(attention32.forward(x.to(at::kFloat), cos32, sin32), expected), 2e-5);
}

TEST(LlamaComponents, QkvLayoutGroupsHeadsByKeyValueHead) {
  const triax::QkvLayout layout{6, 2, 2};   // 3 query heads per kv head, head_dim 2
  auto rows = [](int64_t n, double base) {  // row r of the result holds base + r
    return (at::arange(n, at::kDouble) + base).unsqueeze(1).expand({n, 3}).contiguous();
  };
  const at::Tensor q = rows(12, 0), k = rows(4, 100), v = rows(4, 200);
  const at::Tensor fused = layout.fuse(q, k, v);
  ASSERT_EQ(fused.sizes(), (std::vector<int64_t>{2, 10, 3}));
  EXPECT_EQ(layout.shape({3}), (std::vector<int64_t>{2, 10, 3}));
  // Block 1: query heads 3, 4, 5 (rows 6..11), key head 1 (rows 2, 3), value head 1.
  const std::vector<double> block1 = {6, 7, 8, 9, 10, 11, 102, 103, 202, 203};
  for (int64_t r = 0; r < 10; ++r)
    EXPECT_EQ(fused[1][r][0].item<double>(), block1[static_cast<size_t>(r)]) << "row " << r;
  const auto [q2, k2, v2] = layout.split(fused);
  EXPECT_TRUE(at::equal(q2, q));
  EXPECT_TRUE(at::equal(k2, k));
  EXPECT_TRUE(at::equal(v2, v));
  EXPECT_TRUE(at::equal(layout.split(fused.select(2, 0))[1], k.select(1, 0)));  // a bias: no trailing dims
}

// The fused projection against the unfused computation it replaces, from the same weights: three
// separate projections, the heads of each, rotary, attention with enable_gqa, o_proj. Outputs,
// the input's gradient and each weight's gradient agree (the fused one split as QkvLayout says).
// An MHA shape, a GQA shape with several query heads per group, and one with a single kv head.
TEST(LlamaComponents, FusedQkvEqualsSeparateProjections) {
  for (const auto& [heads, kv_heads] : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {6, 2}, {4, 1}}) {
    AttentionShape shape;
    shape.hidden_size = 24;
    shape.heads = heads;
    shape.kv_heads = kv_heads;
    shape.qkv_bias = true;
    shape.output_bias = true;
    const int64_t d = 24 / heads, q_out = heads * d, kv_out = kv_heads * d;
    triax::GroupedQueryAttention attention(shape, make_context(1, at::kDouble));
    const at::Tensor wq = normal({q_out, 24}, 0.3, 31), wk = normal({kv_out, 24}, 0.3, 32);
    const at::Tensor wv = normal({kv_out, 24}, 0.3, 33), wo = normal({24, q_out}, 0.3, 34);
    const at::Tensor bq = normal({q_out}, 0.3, 35), bk = normal({kv_out}, 0.3, 36), bv = normal({kv_out}, 0.3, 37);
    const triax::QkvLayout layout = triax::QkvLayout::of(shape);
    set_qkv(attention, shape, wq, wk, wv);
    {
      at::NoGradGuard guard;
      attention.qkv_proj->bias.copy_(layout.fuse(bq, bk, bv));
      attention.o_proj->weight.copy_(wo);
    }
    const at::Tensor x_values = normal({2, 7, 24}, 1.0, 38), grad = normal({2, 7, 24}, 1.0, 39);
    triax::RotaryEmbedding rope({d, 10000.0, 16, std::nullopt}, c10::Device(c10::kCPU));
    auto [cos, sin] = rope.tables(7, at::kDouble);

    at::Tensor x = x_values.clone().requires_grad_(true);
    at::Tensor y = attention.forward(x, cos, sin);
    y.backward(grad);

    std::vector<at::Tensor> leaves;
    for (const at::Tensor& t : {x_values, wq, wk, wv, bq, bk, bv}) leaves.push_back(t.clone().requires_grad_(true));
    auto heads_of = [&](const at::Tensor& w, const at::Tensor& b, int64_t n) {
      return at::linear(leaves[0], w, b).view({2, 7, n, d}).transpose(1, 2);
    };
    const at::Tensor q = triax::apply_rotary(heads_of(leaves[1], leaves[4], heads), cos, sin);
    const at::Tensor k = triax::apply_rotary(heads_of(leaves[2], leaves[5], kv_heads), cos, sin);
    const at::Tensor v = heads_of(leaves[3], leaves[6], kv_heads);
    const at::Tensor attended = at::scaled_dot_product_attention(q, k, v, {}, 0.0, true, std::nullopt, true);
    const at::Tensor expected = at::linear(attended.transpose(1, 2).reshape({2, 7, q_out}), wo);
    expected.backward(grad);

    const std::string what = std::to_string(heads) + "/" + std::to_string(kv_heads) + " heads: ";
    EXPECT_LT(max_abs_diff(y, expected), 1e-12) << what << "output";
    EXPECT_LT(max_abs_diff(x.grad(), leaves[0].grad()), 1e-12) << what << "input gradient";
    const auto dw = layout.split(attention.qkv_proj->weight.grad());
    const auto db = layout.split(attention.qkv_proj->bias.grad());
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_LT(max_abs_diff(dw[i], leaves[1 + i].grad()), 1e-12) << what << "weight gradient " << i;
      EXPECT_LT(max_abs_diff(db[i], leaves[4 + i].grad()), 1e-12) << what << "bias gradient " << i;
    }
  }
}

TEST(LlamaComponents, SwiGluMatchesFormula) {
  LlamaConfig c = read_config("hidden_size: 16\nnum_attention_heads: 4\nintermediate_size: 40\n");
  triax::SwiGluMlp mlp(c.hidden_size, c.intermediate_size, make_context(1, at::kDouble));
  fill_normal(mlp.gate_up_proj->weight, 0.5, 21);
  fill_normal(mlp.down_proj->weight, 0.5, 23);
  EXPECT_EQ(mlp.gate_up_proj->weight.sizes(), (std::vector<int64_t>{2, 40, 16}));  // gate, up
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(24);
  at::Tensor x = at::randn({3, 7, 16}, g, at::kDouble);
  at::Tensor expected = ref_mlp(x, mlp.gate_up_proj->weight[0], mlp.gate_up_proj->weight[1], mlp.down_proj->weight);
  EXPECT_LT(max_abs_diff(mlp.forward(x), expected), 1e-12);
}

// The fused gate/up projection against separate gate and up projections with the same weights,
// forward and backward.
TEST(LlamaComponents, FusedGateUpEqualsSeparateProjections) {
  for (c10::ScalarType dtype : {at::kDouble, at::kFloat}) {
    triax::SwiGluMlp mlp(16, 40, make_context(1, dtype));
    const at::Tensor wg = normal({40, 16}, 0.5, 41).to(dtype), wu = normal({40, 16}, 0.5, 42).to(dtype);
    const at::Tensor wd = normal({16, 40}, 0.5, 43).to(dtype);
    {
      at::NoGradGuard guard;
      mlp.gate_up_proj->weight.copy_(at::stack({wg, wu}));
      mlp.down_proj->weight.copy_(wd);
    }
    const at::Tensor x_values = normal({3, 7, 16}, 1.0, 44).to(dtype), grad = normal({3, 7, 16}, 1.0, 45).to(dtype);
    at::Tensor x = x_values.clone().requires_grad_(true);
    at::Tensor y = mlp.forward(x);
    y.backward(grad);

    at::Tensor rx = x_values.clone().requires_grad_(true), rg = wg.clone().requires_grad_(true);
    at::Tensor ru = wu.clone().requires_grad_(true);
    at::Tensor expected = at::linear(triax::swiglu(at::linear(rx, rg), at::linear(rx, ru)), wd);
    expected.backward(grad);

    // fp32: the fused GEMM may sum in another order than two separate ones.
    const double tolerance = dtype == at::kDouble ? 1e-12 : 1e-5;
    const std::string what = c10::toString(dtype);
    EXPECT_LT(max_abs_diff(y, expected), tolerance) << what;
    EXPECT_LT(max_abs_diff(x.grad(), rx.grad()), tolerance) << what;
    EXPECT_LT(max_abs_diff(mlp.gate_up_proj->weight.grad()[0], rg.grad()), tolerance) << what;
    EXPECT_LT(max_abs_diff(mlp.gate_up_proj->weight.grad()[1], ru.grad()), tolerance) << what;
  }
}

// The add after a layer's MLP is left to the next layer's input_layernorm (add_rms_norm): a layer
// given residual + pending returns, bit for bit, what forward() returns for their sum, its own
// MLP output pending, and the gradients reaching both parts are those of the sum.
TEST(LlamaComponents, DecoderLayerLeavesTheMlpAddToTheNextNorm) {
  const LlamaConfig config = read_config(tiny_yaml(false));
  const std::shared_ptr<triax::PreNormDecoderLayer> llama_layer =
      triax::llama::LlamaModel::decoder_layer(config, make_context(1, at::kFloat), 0);
  triax::PreNormDecoderLayer& layer = *llama_layer;
  uint64_t seed = 60;
  {
    at::NoGradGuard guard;
    for (at::Tensor& p : layer.parameters()) fill_normal(p, 0.3, seed++);
  }
  const at::Tensor angles = at::arange(7, at::kFloat).unsqueeze(1) * at::linspace(0.1, 1.0, 4).unsqueeze(0);
  const std::vector<at::Tensor> rotary{at::cos(angles), at::sin(angles)};  // [seq 7, head_dim 4]
  const at::Tensor residual_values = normal({3, 7, 16}, 1.0, 70).to(at::kFloat);
  const at::Tensor pending_values = normal({3, 7, 16}, 1.0, 71).to(at::kFloat);
  const at::Tensor grad = normal({3, 7, 16}, 1.0, 72).to(at::kFloat);

  at::Tensor residual = residual_values.clone().requires_grad_(true);
  at::Tensor pending = pending_values.clone().requires_grad_(true);
  const triax::ResidualStream out = layer.forward_stream({residual, pending}, rotary);
  ASSERT_TRUE(out.pending.defined()) << "the MLP's add was done by the layer";
  const at::Tensor streamed = out.materialized();
  streamed.backward(grad);

  at::Tensor sum = (residual_values + pending_values).requires_grad_(true);
  const at::Tensor expected = layer.forward(sum, rotary);
  expected.backward(grad);
  EXPECT_TRUE(at::equal(streamed, expected));
  EXPECT_TRUE(at::equal(residual.grad(), sum.grad()));
  EXPECT_TRUE(at::equal(pending.grad(), sum.grad()));
  // forward() is forward_stream() with nothing pending, its output materialized.
  EXPECT_TRUE(at::equal(layer.forward_stream({sum.detach(), at::Tensor()}, rotary).materialized(), expected));
}

}  // namespace
