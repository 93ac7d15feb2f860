// Grouped-query causal self-attention with rotary embeddings (Hugging Face LlamaAttention).
//
// q_proj/k_proj/v_proj are column-parallel (each tp rank holds whole heads), o_proj is
// row-parallel, so attention itself runs on this rank's heads over the whole sequence, in either
// tp_mode. Attention runs through scaled_dot_product_attention with enable_gqa, so K/V
// heads are never repeated in memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>

#include "llama_config.hpp"
#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax::llama {

class LlamaAttention : public torch::nn::Module {
 public:
  LlamaAttention(const LlamaConfig& config, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] both in
  // REDUCE_SCATTER mode); cos, sin: [seq, head_dim] of the whole sequence, in x's dtype.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

  std::shared_ptr<ColumnParallelLinear> q_proj, k_proj, v_proj;
  std::shared_ptr<RowParallelLinear> o_proj;

 private:
  TensorParallel tp_;
  int64_t local_heads_;     // query heads on this tp rank
  int64_t local_kv_heads_;  // key/value heads on this tp rank
  int64_t head_dim_;
  double scale_;
};

}  // namespace triax::llama
