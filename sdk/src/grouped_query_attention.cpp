#include "triax/layers/grouped_query_attention.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "triax/error.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/key_value_cache.hpp"
#include "triax/layers/ring_attention.hpp"
#include "triax/layers/rotary_qkv.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"

namespace triax {

std::vector<int64_t> QkvLayout::shape(std::vector<int64_t> trailing) const {
  trailing.insert(trailing.begin(), {kv_heads, (group() + 2) * head_dim});
  return trailing;
}

at::Tensor QkvLayout::fuse(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const {
  auto blocks = [&](const at::Tensor& t) {  // [n x head_dim, ...] -> [kv_heads, n / kv_heads x head_dim, ...]
    std::vector<int64_t> shape = t.sizes().vec();
    shape.front() /= kv_heads;
    shape.insert(shape.begin(), kv_heads);
    return t.reshape(shape);
  };
  return at::cat({blocks(q), blocks(k), blocks(v)}, 1);
}

std::array<at::Tensor, 3> QkvLayout::split(const at::Tensor& fused) const {
  const std::vector<at::Tensor> parts = fused.split_with_sizes({group() * head_dim, head_dim, head_dim}, 1);
  auto whole = [](const at::Tensor& t) {  // [kv_heads, n, ...] -> [kv_heads x n, ...]
    std::vector<int64_t> shape(t.sizes().begin() + 1, t.sizes().end());
    shape.front() *= t.size(0);
    return t.reshape(shape);
  };
  return {whole(parts[0]), whole(parts[1]), whole(parts[2])};
}

HfTensorRule QkvLayout::hf_rule(const std::string& prefix, const std::string& what,
                                std::vector<int64_t> trailing) const {
  return HfTensorRule::interleave(prefix + "qkv_proj." + what, shape(std::move(trailing)), 1,
                                  {prefix + "q_proj." + what, prefix + "k_proj." + what, prefix + "v_proj." + what},
                                  {group() * head_dim, head_dim, head_dim});
}

GroupedQueryAttention::GroupedQueryAttention(const AttentionShape& shape, const ModelContext& context)
    : tp_(TensorParallel::of(context)),
      local_heads_(shape.heads / context.tp_size),
      local_kv_heads_(shape.kv_heads / context.tp_size),
      group_(QkvLayout::of(shape).group()),
      head_dim_(QkvLayout::of(shape).head_dim),
      scale_(1.0 / std::sqrt(static_cast<double>(head_dim_))),
      rotary_(shape.rotary),
      rope_interleaved_(shape.rope_interleaved),
      sliding_window_(shape.sliding_window),
      cp_ring_(context.cp_ring_attention) {
  const int64_t h = shape.hidden_size;
  LinearOptions qkv = LinearOptions::of(h, (group_ + 2) * head_dim_, context, shape.qkv_bias);
  qkv.groups = shape.kv_heads;           // QkvLayout: [kv_heads, (group + 2) x head_dim, hidden]
  qkv.widest_part = group_ * head_dim_;  // the query heads of a group
  qkv_proj = register_module("qkv_proj", std::make_shared<ColumnParallelLinear>(qkv, tp_));
  o_proj = register_module("o_proj", std::make_shared<RowParallelLinear>(
                                         LinearOptions::of(shape.heads * head_dim_, h, context, shape.output_bias), tp_));
  if (shape.qk_norm) {
    auto head_norm = [&] {
      return std::make_shared<RMSNorm>(head_dim_, shape.qk_norm_eps, context.device, context.dtype);
    };
    q_norm = register_module("q_norm", head_norm());
    k_norm = register_module("k_norm", head_norm());
  }
}

at::Tensor GroupedQueryAttention::project_blocks(const at::Tensor& x) { return blocks_of(qkv_proj->forward(x)); }

at::Tensor GroupedQueryAttention::blocks_of(const at::Tensor& projected) {
  // [batch, seq, kv_heads/tp x (group + 2) x head_dim] -> per key/value head: its query heads, its
  // key head, its value head. The sequence length comes from the projection's output (it differs
  // from x's in sequence-parallel mode).
  const at::Tensor blocks = projected.view({projected.size(0), -1, local_kv_heads_, group_ + 2, head_dim_});
  return q_norm ? normalised_query_key_heads(blocks) : blocks;
}

at::Tensor GroupedQueryAttention::normalised_query_key_heads(const at::Tensor& blocks) const {
  // The weights are shared by heads that sit on other tp ranks: each rank's gradient is its heads' share.
  auto normalised = [&](const at::Tensor& heads, const RMSNorm& norm) {
    return rms_norm(heads, identity_forward_all_reduce_backward(norm.weight, tp_), norm.eps());
  };
  return at::cat({normalised(blocks.narrow(3, 0, group_), *q_norm), normalised(blocks.narrow(3, group_, 1), *k_norm),
                  blocks.narrow(3, group_ + 1, 1)},
                 3);
}

at::Tensor GroupedQueryAttention::output(const at::Tensor& attended) {
  return o_proj->forward(attended.transpose(1, 2).reshape({attended.size(0), -1, local_heads_ * head_dim_}));
}

std::array<at::Tensor, 3> GroupedQueryAttention::positioned_qkv(const at::Tensor& blocks, const at::Tensor& cos,
                                                                 const at::Tensor& sin) const {
  if (!rotary_) return split_qkv(blocks);
  if (!rope_interleaved_) return rotary_qkv(blocks, cos, sin, records_qkv_gradient_amax());
  // GPT-J pairs (2i, 2i+1) of q and k regrouped as halves (i, i + head_dim/2): rotating those is
  // the same rotation, and q.k is unchanged when q and k share one order of their features. v keeps its own.
  const at::Tensor qk = blocks.narrow(3, 0, group_ + 1);
  const at::Tensor halves = qk.unflatten(-1, {head_dim_ / 2, 2}).transpose(-1, -2).flatten(-2);
  return rotary_qkv(at::cat({halves, blocks.narrow(3, group_ + 1, 1)}, 3), cos, sin);
}

at::Tensor GroupedQueryAttention::forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                          const MaskedAttention& masked) {
  // Positioned q and k, and a copy of v (as a view, attention's saved v would keep the whole q/k/v
  // output alive: 3x v's size at 1.7b).
  const at::Tensor blocks = project_blocks(x);
  const auto [q, k, v] = masked.position_ids.defined() ? positioned_qkv_at(blocks, cos, sin, masked.position_ids)
                                                       : positioned_qkv(blocks, cos, sin);
  if (logit_maxima_.defined() && is_training()) keep_logit_maxima(q, k, masked);
  ContextParallel cp = ContextParallel::of(tp_.host);
  cp.ring = cp_ring_;
  if (cp.active()) {  // this rank's queries over every cp rank's keys (triax/layers/context_parallel.hpp)
    if (!masked.mask.defined())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  "parallelism.context_parallel_size: attention got no mask of where the gathered keys sit");
    if (cp.ring) return output(ring_attention(q, k, v, cp, scale_, ring_masking(masked, sliding_window_)));
    const auto [keys, values] = gather_keys_values(k, v, cp);
    return output(at::scaled_dot_product_attention(q, keys, values, masked.mask, /*dropout_p=*/0.0,
                                                   /*is_causal=*/false, scale_, /*enable_gqa=*/true));
  }
  // Without a mask (nullopt, not an undefined tensor), the causal flag keeps
  // scaled_dot_product_attention's fastest kernels.
  const bool causal = !masked.mask.defined();
  const std::optional<at::Tensor> mask = causal ? std::nullopt : std::optional<at::Tensor>(masked.mask);
  return output(at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0, causal, scale_,
                                                 /*enable_gqa=*/true));
}

std::array<at::Tensor, 3> GroupedQueryAttention::positioned_qkv_at(const at::Tensor& blocks, const at::Tensor& cos,
                                                                    const at::Tensor& sin,
                                                                    const at::Tensor& position_ids) const {
  std::vector<at::Tensor> q, k, v;
  for (int64_t i = 0; i < blocks.size(0); ++i) {
    const auto [c, s] = rotary_rows(cos, sin, position_ids, i);
    const auto [qi, ki, vi] = positioned_qkv(blocks.narrow(0, i, 1), c, s);
    q.push_back(qi);
    k.push_back(ki);
    v.push_back(vi);
  }
  return {at::cat(q, 0), at::cat(k, 0), at::cat(v, 0)};
}

at::Tensor GroupedQueryAttention::forward_cached(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                                 const CachedStep& step) {
  return forward_cached_projected(qkv_proj->forward(x), cos, sin, step);
}

at::Tensor GroupedQueryAttention::forward_cached_projected(const at::Tensor& projected, const at::Tensor& cos,
                                                           const at::Tensor& sin, const CachedStep& step) {
  const at::Tensor blocks = blocks_of(projected);
  const int64_t rows = blocks.size(0), fresh = blocks.size(1);
  const bool prompt_only =
      std::all_of(step.starts.begin(), step.starts.end(), [](int64_t start) { return start == 0; });
  if (rotary_ && !rope_interleaved_ && step.keep == fresh && !prompt_only) {
    // A decoding step: the new keys and values rotated straight into the cache.
    const KeyValueCache::KeysValues stored = KeyValueCache::stored(step, local_kv_heads_, head_dim_, blocks.options());
    at::Tensor keys = stored.keys, values = stored.values;
    const at::Tensor q = rotary_qkv_into_cache(blocks, cos, sin, step.positions, keys, values);
    return output(KeyValueCache::attend_stored(step, q, stored, scale_, sliding_window_));
  }
  // Each row at its own positions: the rows' tokens side by side as one sequence, rotated by the
  // tables' rows of their positions (sequence-parallel padding may run past the tables: it reads
  // the last row, and is discarded).
  const at::Tensor side_by_side = blocks.reshape({1, rows * fresh, local_kv_heads_, group_ + 2, head_dim_});
  // A NoPE layer has no tables (cos and sin may be undefined).
  const at::Tensor positions = rotary_ ? step.positions.reshape({-1}).clamp_max(cos.size(0) - 1) : at::Tensor();
  const auto [q, k, v] = rotary_ ? positioned_qkv(side_by_side, cos.index_select(0, positions),
                                                  sin.index_select(0, positions))
                                 : positioned_qkv(side_by_side, cos, sin);
  auto by_row = [&](const at::Tensor& t) {  // [1, heads, rows x new, head_dim] -> [rows, heads, new, head_dim]
    return t.transpose(1, 2).reshape({rows, fresh, t.size(1), head_dim_}).transpose(1, 2);
  };
  return output(KeyValueCache::attend(step, by_row(q), by_row(k), by_row(v), scale_, sliding_window_));
}

}  // namespace triax
