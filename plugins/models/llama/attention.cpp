#include "attention.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "triax/layers/fused_ops.hpp"

namespace triax::llama {

LlamaAttention::LlamaAttention(const LlamaConfig& config, const ModelContext& context)
    : tp_(TensorParallel::of(context)),
      head_dim_(config.head_dim()),
      scale_(1.0 / std::sqrt(static_cast<double>(config.head_dim()))) {
  // The model checked that the heads split evenly over the tensor-parallel group.
  const TensorParallel& tp = tp_;
  local_heads_ = config.num_attention_heads / tp.size;
  local_kv_heads_ = config.num_key_value_heads / tp.size;

  auto linear = [&](int64_t in, int64_t out) { return LinearOptions::of(in, out, context, config.attention_bias); };
  const int64_t h = config.hidden_size;
  q_proj = register_module("q_proj", std::make_shared<ColumnParallelLinear>(linear(h, config.q_features()), tp));
  k_proj = register_module("k_proj", std::make_shared<ColumnParallelLinear>(linear(h, config.kv_features()), tp));
  v_proj = register_module("v_proj", std::make_shared<ColumnParallelLinear>(linear(h, config.kv_features()), tp));
  o_proj = register_module("o_proj", std::make_shared<RowParallelLinear>(linear(config.q_features(), h), tp));
}

at::Tensor LlamaAttention::forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t batch = x.size(0);
  // [batch, seq, heads * head_dim] -> [batch, heads, seq, head_dim]. The sequence length comes
  // from the projection's output (it differs from x's in sequence-parallel mode).
  auto heads = [&](const at::Tensor& projected, int64_t count) {
    return projected.view({batch, -1, count, head_dim_}).transpose(1, 2);
  };
  // One gather (sequence-parallel) or backward all-reduce (ALL_REDUCE) for q, k and v together.
  const at::Tensor input = gather_column_parallel_input(x, tp_);
  at::Tensor q = triax::apply_rotary(heads(q_proj->forward_gathered(input), local_heads_), cos, sin);
  at::Tensor k = triax::apply_rotary(heads(k_proj->forward_gathered(input), local_kv_heads_), cos, sin);
  at::Tensor v = heads(v_proj->forward_gathered(input), local_kv_heads_);
  at::Tensor attended = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                         /*is_causal=*/true, scale_, /*enable_gqa=*/true);
  return o_proj->forward(attended.transpose(1, 2).reshape({batch, -1, local_heads_ * head_dim_}));
}

}  // namespace triax::llama
