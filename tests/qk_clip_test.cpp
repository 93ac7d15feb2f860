// QK-clip on the SDK's attention: the factors computed from the tracked logits scale exactly the
// query (and, where a key head serves one query head, key) rows of the heads above the threshold,
// so that recomputing their largest logit gives the threshold, and the other heads keep theirs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "triax/error.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/model.hpp"

namespace triax {
namespace {

// Each query head's largest causal logit of x under the fused weight [kv, (group + 2) x d, hidden].
at::Tensor head_maxima(const at::Tensor& x, const at::Tensor& fused, const AttentionShape& shape) {
  const auto [wq, wk, wv] = QkvLayout::of(shape).split(fused);
  const int64_t d = shape.hidden_size / shape.heads, seq = x.size(1), group = shape.heads / shape.kv_heads;
  const at::Tensor q = at::matmul(x, wq.t()).view({x.size(0), seq, shape.heads, d}).transpose(1, 2);
  const at::Tensor k = at::matmul(x, wk.t()).view({x.size(0), seq, shape.kv_heads, d}).transpose(1, 2);
  at::Tensor logits = at::matmul(q, k.repeat_interleave(group, 1).transpose(-1, -2)) / std::sqrt(double(d));
  logits = logits.masked_fill(at::ones({seq, seq}, at::kBool).tril().logical_not(), -1e30);
  return logits.amax({0, 2, 3});
}

AttentionShape shape_of(int64_t hidden_size, int64_t heads, int64_t kv_heads) {
  AttentionShape shape;
  shape.hidden_size = hidden_size;
  shape.heads = heads;
  shape.kv_heads = kv_heads;
  return shape;
}

void expect_clipped_to(const AttentionShape& shape) {
  ModelContext context;
  context.dtype = at::kDouble;
  GroupedQueryAttention attention(shape, context);
  at::manual_seed(21);
  {
    at::NoGradGuard no_grad;
    attention.qkv_proj->weight.normal_(0.0, 0.5);
    attention.o_proj->weight.normal_(0.0, 0.1);
  }
  const at::Tensor x = at::randn({2, 10, shape.hidden_size}, at::kDouble);
  const at::Tensor before = head_maxima(x, attention.qkv_proj->weight, shape);
  const double threshold = before.median().item<double>();  // about half the heads above it
  attention.track_logits(true);
  attention.forward(x, at::Tensor(), at::Tensor());
  const auto [weight_factor, bias_factor] = attention.qk_clip_factors(threshold);
  EXPECT_EQ(bias_factor.dim(), 2);
  {
    at::NoGradGuard no_grad;
    attention.qkv_proj->weight.mul_(weight_factor);
  }
  const at::Tensor after = head_maxima(x, attention.qkv_proj->weight, shape);
  for (int64_t h = 0; h < shape.heads; ++h) {
    const double was = before[h].item<double>();
    EXPECT_NEAR(after[h].item<double>(), was > threshold ? threshold : was, 1e-6 * std::abs(was)) << "head " << h;
  }
}

TEST(QkClip, ScalesQueryRowsOfHeadsAboveTheThresholdUnderGqa) {
  AttentionShape shape = shape_of(32, 4, 2);
  shape.rotary = false;
  expect_clipped_to(shape);
}

TEST(QkClip, SplitsTheFactorBetweenQueryAndKeyUnderMha) {
  AttentionShape shape = shape_of(32, 4, 4);
  shape.rotary = false;
  expect_clipped_to(shape);
}

TEST(QkClip, AttentionWithQkNormRefuses) {
  AttentionShape shape = shape_of(32, 4, 2);
  shape.qk_norm = true;
  GroupedQueryAttention attention(shape, ModelContext{});
  try {
    attention.track_logits(true);
    FAIL() << "no refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TRIAX_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("qk-norm"), std::string::npos) << e.what();
  }
}

TEST(QkClip, AModelWithoutAttentionRefuses) {
  struct NoAttention : Model {
    StageOutput forward(const StageInput&) override { return {}; }
    double flops_per_token(int64_t) const override { return 0; }
    int64_t total_parameters() const override { return 0; }
    std::string resolved_config() const override { return ""; }
  } model;
  try {
    model.track_attention_logits(true);
    FAIL() << "no refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TRIAX_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("no attention layer"), std::string::npos);
  }
}

}  // namespace
}  // namespace triax
