#include "triax/layers/grouped_query_attention.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "triax/layers/fused_ops.hpp"
#include "triax/layers/key_value_cache.hpp"

namespace triax {

GroupedQueryAttention::GroupedQueryAttention(const AttentionShape& shape, const ModelContext& context)
    : tp_(TensorParallel::of(context)),
      local_heads_(shape.heads / context.tp_size),
      local_kv_heads_(shape.kv_heads / context.tp_size),
      head_dim_(shape.hidden_size / shape.heads),
      scale_(1.0 / std::sqrt(static_cast<double>(head_dim_))) {
  auto linear = [&](int64_t in, int64_t out) { return LinearOptions::of(in, out, context, shape.bias); };
  const int64_t h = shape.hidden_size, q = shape.heads * head_dim_, kv = shape.kv_heads * head_dim_;
  q_proj = register_module("q_proj", std::make_shared<ColumnParallelLinear>(linear(h, q), tp_));
  k_proj = register_module("k_proj", std::make_shared<ColumnParallelLinear>(linear(h, kv), tp_));
  v_proj = register_module("v_proj", std::make_shared<ColumnParallelLinear>(linear(h, kv), tp_));
  o_proj = register_module("o_proj", std::make_shared<RowParallelLinear>(linear(q, h), tp_));
}

GroupedQueryAttention::Projected GroupedQueryAttention::project(const at::Tensor& x) {
  const int64_t batch = x.size(0);
  // [batch, seq, heads * head_dim] -> [batch, heads, seq, head_dim]. The sequence length comes
  // from the projection's output (it differs from x's in sequence-parallel mode).
  auto heads = [&](const at::Tensor& projected, int64_t count) {
    return projected.view({batch, -1, count, head_dim_}).transpose(1, 2);
  };
  // One gather (sequence-parallel) or backward all-reduce (ALL_REDUCE) for q, k and v together.
  const at::Tensor input = gather_column_parallel_input(x, tp_);
  return {heads(q_proj->forward_gathered(input), local_heads_), heads(k_proj->forward_gathered(input), local_kv_heads_),
          heads(v_proj->forward_gathered(input), local_kv_heads_)};
}

at::Tensor GroupedQueryAttention::output(const at::Tensor& attended) {
  return o_proj->forward(attended.transpose(1, 2).reshape({attended.size(0), -1, local_heads_ * head_dim_}));
}

at::Tensor GroupedQueryAttention::forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  Projected p = project(x);
  at::Tensor q = triax::apply_rotary(p.q, cos, sin);
  at::Tensor k = triax::apply_rotary(p.k, cos, sin);
  return output(at::scaled_dot_product_attention(q, k, p.v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                 /*is_causal=*/true, scale_, /*enable_gqa=*/true));
}

at::Tensor GroupedQueryAttention::forward_cached(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                          const CachedStep& step) {
  Projected p = project(x);
  const int64_t fresh = p.q.size(2);
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < p.q.size(0); ++i) {
    const int64_t start = step.starts[static_cast<size_t>(i)];
    // Sequence-parallel padding may run past the tables: it reads the last row, and is discarded.
    at::Tensor positions = at::arange(start, start + fresh, at::TensorOptions().dtype(at::kLong).device(cos.device()))
                               .clamp_max(cos.size(0) - 1);
    at::Tensor c = cos.index_select(0, positions), s = sin.index_select(0, positions);
    auto& cache = dynamic_cast<KeyValueCache&>(*step.rows[static_cast<size_t>(i)]);
    rows.push_back(cache.attend(triax::apply_rotary(p.q.narrow(0, i, 1), c, s),
                                triax::apply_rotary(p.k.narrow(0, i, 1), c, s), p.v.narrow(0, i, 1), start, step.keep,
                                scale_));
  }
  return output(at::cat(rows, 0));
}

}  // namespace triax
