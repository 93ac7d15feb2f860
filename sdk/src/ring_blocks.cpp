// The block arithmetic of ring attention (triax/layers/ring_blocks.hpp).
#include "triax/layers/ring_blocks.hpp"

#include <ATen/ATen.h>

#include <limits>
#include <utility>

#include "triax/layers/attention_kernels.hpp"
#include "triax/layers/attention_mask.hpp"

namespace triax {
namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// k or v [batch, kv_heads, length, head_dim] repeated for the query heads each serves
// (head h uses key/value head h / group, as scaled_dot_product_attention's enable_gqa).
at::Tensor for_query_heads(const at::Tensor& t, int64_t heads) {
  const int64_t group = heads / t.size(1);
  return group == 1 ? t : t.repeat_interleave(group, 1);
}

// The gradient of for_query_heads' output, summed back per key/value head.
at::Tensor per_kv_head(const at::Tensor& grad, int64_t kv_heads) {
  const int64_t group = grad.size(1) / kv_heads;
  return group == 1 ? grad : grad.unflatten(1, {kv_heads, group}).sum(2);
}

// Merges (out, lse) into the running (total_out, total_lse), all of one query chunk.
void merge(const at::Tensor& total_out, const at::Tensor& total_lse, const at::Tensor& out, const at::Tensor& lse) {
  const at::Tensor merged_lse = at::logaddexp(total_lse, lse);
  // Rows no key reached yet stay at -inf; subtracting 0 there keeps the weights 0, not NaN.
  const at::Tensor reference = merged_lse.masked_fill(merged_lse == kMinusInfinity, 0.0);
  const at::Tensor kept = (total_lse - reference).exp().unsqueeze(-1);
  const at::Tensor added = (lse - reference).exp().unsqueeze(-1);
  total_out.copy_(total_out * kept + out.to(total_out.scalar_type()) * added);
  total_lse.copy_(merged_lse);
}

}  // namespace

RingBlocks::RingBlocks(int rank, int size, int64_t chunk_length, double scale, RingMasking masking, c10::Device device)
    : rank_(rank), size_(size), chunk_(chunk_length), scale_(scale), masking_(std::move(masking)), device_(device) {
  if (masking_.documents.defined()) masking_.documents = masking_.documents.to(device);
}

int64_t RingBlocks::chunk_of(int rank, int half) const { return half == 0 ? rank : 2 * size_ - 1 - rank; }

RingBlocks::Pair RingBlocks::pair(int64_t query_chunk, int64_t key_chunk) const {
  if (key_chunk > query_chunk) return Pair::Invisible;
  if (key_chunk == query_chunk) return Pair::Causal;
  // The pair's closest tokens are the query chunk's first and the key chunk's last: when even
  // they lie a window or more apart, no query of the pair sees any of its keys.
  const int64_t nearest = query_chunk * chunk_ - ((key_chunk + 1) * chunk_ - 1);
  if (masking_.window && nearest >= *masking_.window) return Pair::Invisible;
  return Pair::Full;
}

at::Tensor RingBlocks::visibility(int64_t query_chunk, int64_t key_chunk, c10::Device device) const {
  const auto options = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor queries = at::arange(query_chunk * chunk_, (query_chunk + 1) * chunk_, options);
  const at::Tensor keys = at::arange(key_chunk * chunk_, (key_chunk + 1) * chunk_, options);
  const at::Tensor visible = causal_visibility(queries, keys, masking_.window);  // [chunk, chunk]
  if (!masking_.documents.defined()) return visible.view({1, 1, chunk_, chunk_});
  const at::Tensor& documents = masking_.documents;
  const at::Tensor same =
      documents.index_select(1, queries).unsqueeze(2) == documents.index_select(1, keys).unsqueeze(1);
  return (same & visible).unsqueeze(1);
}

RingBlocks::Merged RingBlocks::start(const at::Tensor& q) {
  const c10::ScalarType accumulation = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto options = q.options().dtype(accumulation);
  return {at::zeros(q.sizes(), options), at::full({q.size(0), q.size(1), q.size(2)}, kMinusInfinity, options)};
}

void RingBlocks::for_each_visible_pair(int source, const PairVisitor& visit) const {
  for (int query_half = 0; query_half < 2; ++query_half) {
    const int64_t query_chunk = chunk_of(rank_, query_half);
    for (int key_half = 0; key_half < 2; ++key_half) {
      const int64_t key_chunk = chunk_of(source, key_half);
      const Pair kind = pair(query_chunk, key_chunk);
      if (kind == Pair::Invisible) continue;
      // With documents or a window every visible pair carries its mask (the diagonal's as well).
      const at::Tensor visible = masking_.masks() ? visibility(query_chunk, key_chunk, device_) : at::Tensor();
      visit(query_half * chunk_, key_half * chunk_, visible, kind == Pair::Causal && !visible.defined());
    }
  }
}

void RingBlocks::attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int source,
                        Merged& merged) const {
  const int64_t heads = q.size(1);
  for_each_visible_pair(source, [&](int64_t queries, int64_t keys, const at::Tensor& visible, bool causal) {
    const AttentionWithLse part =
        attention_with_lse(q.narrow(2, queries, chunk_), for_query_heads(k.narrow(2, keys, chunk_), heads),
                           for_query_heads(v.narrow(2, keys, chunk_), heads), visible, causal, scale_);
    merge(merged.out.narrow(2, queries, chunk_), merged.lse.narrow(2, queries, chunk_), part.out, part.lse);
  });
}

std::array<at::Tensor, 2> RingBlocks::backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                               const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                               int source, at::Tensor& dq) const {
  const int64_t heads = q.size(1), kv_heads = k.size(1);
  at::Tensor dk = at::zeros_like(k), dv = at::zeros_like(v);
  for_each_visible_pair(source, [&](int64_t queries, int64_t keys, const at::Tensor& visible, bool causal) {
    auto rows = [&](const at::Tensor& t) { return t.narrow(2, queries, chunk_); };
    const auto [dq_part, dk_part, dv_part] = attention_with_lse_backward(
        rows(grad_out), rows(q), for_query_heads(k.narrow(2, keys, chunk_), heads),
        for_query_heads(v.narrow(2, keys, chunk_), heads), rows(out), rows(lse), visible, causal, scale_);
    rows(dq).add_(dq_part);
    dk.narrow(2, keys, chunk_).add_(per_kv_head(dk_part, kv_heads));
    dv.narrow(2, keys, chunk_).add_(per_kv_head(dv_part, kv_heads));
  });
  return {dk, dv};
}

}  // namespace triax
