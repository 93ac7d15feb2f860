// The Llama plugin's parts against the references of llama_test_support.hpp: RMSNorm, rotary
// embeddings (and Llama-3 frequency scaling), grouped-query attention and the SwiGLU MLP.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "llama_test_support.hpp"
#include "triax/layers/swiglu_mlp.hpp"
#include "triax/layers/rotary_embedding.hpp"
#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/norm.hpp"

namespace {

using namespace llama_test;

triax::AttentionShape attention_shape(const LlamaConfig& c) {
  return {c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.attention_bias};
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

TEST(LlamaComponents, GroupedQueryAttentionMatchesExplicitSoftmax) {
  LlamaConfig c =
      read_config("hidden_size: 32\nnum_attention_heads: 4\nnum_key_value_heads: 2\nmax_position_embeddings: 16\n");
  ModelContext context = make_context(1, at::kDouble);
  triax::GroupedQueryAttention attention(attention_shape(c), context);
  fill_normal(attention.q_proj->weight, 0.3, 11);
  fill_normal(attention.k_proj->weight, 0.3, 12);
  fill_normal(attention.v_proj->weight, 0.3, 13);
  fill_normal(attention.o_proj->weight, 0.3, 14);
  EXPECT_EQ(attention.k_proj->weight.size(0), 16);  // 2 kv heads of 8
  triax::RotaryEmbedding rope(c.rope(), context.device);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(15);
  at::Tensor x = at::randn({2, 12, 32}, g, at::kDouble);
  auto [cos, sin] = rope.tables(12, at::kDouble);
  at::Tensor y = attention.forward(x, cos, sin);
  at::Tensor expected = ref_attention(x, attention.q_proj->weight, attention.k_proj->weight, attention.v_proj->weight,
                                      attention.o_proj->weight, 4, 2, ref_default_frequencies(10000.0, 8));
  ASSERT_EQ(y.sizes(), expected.sizes());
  // The cos/sin tables are fp32 (as in transformers): angles carry fp32 rounding.
  EXPECT_LT(max_abs_diff(y, expected), 1e-6);
  // fp32 module against the same reference
  ModelContext context32 = make_context(1, at::kFloat);
  triax::GroupedQueryAttention attention32(attention_shape(c), context32);
  {
    at::NoGradGuard guard;
    attention32.q_proj->weight.copy_(attention.q_proj->weight);
    attention32.k_proj->weight.copy_(attention.k_proj->weight);
    attention32.v_proj->weight.copy_(attention.v_proj->weight);
    attention32.o_proj->weight.copy_(attention.o_proj->weight);
  }
  auto [cos32, sin32] = rope.tables(12, at::kFloat);
  EXPECT_LT(max_abs_diff(attention32.forward(x.to(at::kFloat), cos32, sin32), expected), 2e-5);
}

TEST(LlamaComponents, SwiGluMatchesFormula) {
  LlamaConfig c = read_config("hidden_size: 16\nnum_attention_heads: 4\nintermediate_size: 40\n");
  triax::SwiGluMlp mlp(c.hidden_size, c.intermediate_size, make_context(1, at::kDouble));
  fill_normal(mlp.gate_proj->weight, 0.5, 21);
  fill_normal(mlp.up_proj->weight, 0.5, 22);
  fill_normal(mlp.down_proj->weight, 0.5, 23);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(24);
  at::Tensor x = at::randn({3, 7, 16}, g, at::kDouble);
  at::Tensor expected = ref_mlp(x, mlp.gate_proj->weight, mlp.up_proj->weight, mlp.down_proj->weight);
  EXPECT_LT(max_abs_diff(mlp.forward(x), expected), 1e-12);
}

}  // namespace
