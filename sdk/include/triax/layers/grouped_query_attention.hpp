// Grouped-query causal self-attention with rotary embeddings (Hugging Face LlamaAttention, also
// Mistral's and Qwen2's), with inference over a KeyValueCache per sequence.
//
// q_proj/k_proj/v_proj are column-parallel (each tp rank holds whole heads), o_proj is
// row-parallel, so attention itself runs on this rank's heads over the whole sequence, in either
// tp_mode. Attention runs through scaled_dot_product_attention with enable_gqa, so K/V
// heads are never repeated in memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>

#include "triax/causal_lm.hpp"
#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax {

struct AttentionShape {
  int64_t hidden_size = 0;
  int64_t heads = 0;     // query heads; head_dim = hidden_size / heads
  int64_t kv_heads = 0;  // key/value heads, dividing heads
  bool bias = false;     // biases on q, k, v and o
};

class GroupedQueryAttention : public torch::nn::Module {
 public:
  // The model checked that heads and kv_heads split evenly over the tensor-parallel group.
  GroupedQueryAttention(const AttentionShape& shape, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] both in
  // REDUCE_SCATTER mode); cos, sin: [seq, head_dim] of the whole sequence, in x's dtype.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
  // Inference: the new tokens of each row of `step` (their KeyValueCache in step.rows) at their
  // positions; cos, sin: the whole tables [max_position_embeddings, head_dim].
  at::Tensor forward_cached(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const CachedStep& step);

  std::shared_ptr<ColumnParallelLinear> q_proj, k_proj, v_proj;
  std::shared_ptr<RowParallelLinear> o_proj;

 private:
  struct Projected {
    at::Tensor q, k, v;  // [batch, heads, seq, head_dim], before the rotary embedding
  };
  Projected project(const at::Tensor& x);
  at::Tensor output(const at::Tensor& attended);  // [batch, heads, seq, head_dim] -> o_proj

  TensorParallel tp_;
  int64_t local_heads_;     // query heads on this tp rank
  int64_t local_kv_heads_;  // key/value heads on this tp rank
  int64_t head_dim_;
  double scale_;
};

}  // namespace triax
