// Causal multi-head self-attention with one fused q/k/v projection and biases (Hugging Face
// GPT2Attention), with inference over a KeyValueCache per sequence. No rotary embedding: the
// positions enter through a learned position embedding (CausalLmLayout::position_embedding).
//
// c_attn is column-parallel with q, k and v as three fused parts, its weight in Conv1D layout
// [hidden, 3, hidden] (triax/layers/linear.hpp), so each tp rank holds whole heads of all three;
// c_proj is row-parallel, [hidden, hidden] in Conv1D layout. Either tp_mode. The key bias gets no
// gradient: the softmax ignores the constant it adds to a query's scores (its true gradient is 0).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <array>
#include <memory>

#include "triax/causal_lm.hpp"
#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax {

class MultiHeadAttention : public torch::nn::Module {
 public:
  // The model checked that heads divide hidden_size and split evenly over the tensor-parallel group.
  MultiHeadAttention(int64_t hidden_size, int64_t heads, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] both in REDUCE_SCATTER mode).
  at::Tensor forward(const at::Tensor& x);
  // Inference: the new tokens of each row of `step` (their KeyValueCache in step.rows).
  at::Tensor forward_cached(const at::Tensor& x, const CachedStep& step);

  std::shared_ptr<ColumnParallelLinear> c_attn;
  std::shared_ptr<RowParallelLinear> c_proj;

 private:
  std::array<at::Tensor, 3> project(const at::Tensor& x);  // q, k, v: [batch, heads/tp, seq, head_dim]
  at::Tensor output(const at::Tensor& attended);           // [batch, heads/tp, seq, head_dim] -> c_proj

  TensorParallel tp_;
  int64_t local_heads_;
  int64_t head_dim_;
  double scale_;
};

}  // namespace triax
