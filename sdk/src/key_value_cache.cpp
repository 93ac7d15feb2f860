#include "triax/layers/key_value_cache.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "triax/causal_lm.hpp"
#include "triax/error.hpp"
#include "triax/layers/attention_mask.hpp"
#include "triax/tensor_text.hpp"

namespace triax {
namespace {

KeyValueCache& row_cache(const CachedStep& step, size_t row) {
  auto* cache = dynamic_cast<KeyValueCache*>(step.rows.at(row));
  if (cache == nullptr)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "KeyValueCache: the layer cache of row " + std::to_string(row) +
                                                  " is not a KeyValueCache");
  return *cache;
}

// Which cached positions each grouped query [rows, 1, group x new, capacity] sees, as the additive
// mask scaled_dot_product_attention makes of a boolean one (0 or -inf, in the queries' dtype).
// The first layer that asks builds it; the others of the step reuse it, so that a decoding step
// converts the mask once, not once per layer.
const at::Tensor& grouped_attention_mask(const CachedStep& step, int64_t group, std::optional<int64_t> window,
                                         at::ScalarType dtype) {
  at::Tensor& mask = step.attention_masks[{group, window.value_or(-1), dtype}];
  if (mask.defined()) return mask;
  const int64_t rows = step.positions.size(0), fresh = step.positions.size(1);
  at::Tensor row_visible = step.visible;  // [rows, 1, new, capacity]
  if (window)  // and within the window of each query's position
    row_visible = row_visible & (at::arange(step.capacity, step.positions.options()).view({1, 1, 1, step.capacity}) >
                                 step.positions.view({rows, 1, fresh, 1}) - *window);
  const at::Tensor visible =
      row_visible.unsqueeze(2).expand({rows, 1, group, fresh, step.capacity}).reshape({rows, 1, group * fresh, step.capacity});
  mask = at::where(visible.logical_not(), -std::numeric_limits<double>::infinity(),
                   at::scalar_tensor(0.0, at::TensorOptions().dtype(dtype).device(visible.device())));
  return mask;
}

}  // namespace

std::shared_ptr<KeyValueCache::Store> KeyValueCache::shared_store(const CachedStep& step, int64_t kv_heads,
                                                                 int64_t head_dim, const at::TensorOptions& options) {
  const auto rows = static_cast<int64_t>(step.rows.size());
  const std::shared_ptr<Store> first = row_cache(step, 0).store_;
  bool shared = first && first->keys.size(0) == rows && first->keys.size(2) == step.capacity &&
                first->keys.scalar_type() == at::typeMetaToScalarType(options.dtype()) && first->keys.device() == options.device();
  for (size_t i = 0; shared && i < step.rows.size(); ++i) {
    const KeyValueCache& cache = row_cache(step, i);
    shared = cache.store_ == first && cache.slot_ == static_cast<int64_t>(i);
  }
  if (shared) return first;

  auto store = std::make_shared<Store>();
  store->keys = at::zeros({rows, kv_heads, step.capacity, head_dim}, options);
  store->values = at::zeros_like(store->keys);
  for (size_t i = 0; i < step.rows.size(); ++i) {
    KeyValueCache& cache = row_cache(step, i);
    const int64_t cached = step.starts[i];
    if (cache.store_ && cached > 0) {
      const auto row = static_cast<int64_t>(i);
      store->keys[row].narrow(1, 0, cached).copy_(cache.store_->keys[cache.slot_].narrow(1, 0, cached));
      store->values[row].narrow(1, 0, cached).copy_(cache.store_->values[cache.slot_].narrow(1, 0, cached));
    }
    cache.store_ = store;
    cache.slot_ = static_cast<int64_t>(i);
  }
  return store;
}

KeyValueCache::KeysValues KeyValueCache::stored(const CachedStep& step, int64_t kv_heads, int64_t head_dim,
                                                const at::TensorOptions& options) {
  for (size_t i = 0; i < step.rows.size(); ++i)
    if (step.starts[i] + step.keep > row_cache(step, i).capacity_)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "KeyValueCache: storing " + std::to_string(step.keep) +
                                                    " tokens after " + std::to_string(step.starts[i]) +
                                                    " exceeds its capacity of " +
                                                    std::to_string(row_cache(step, i).capacity_));
  const std::shared_ptr<Store> store = shared_store(step, kv_heads, head_dim, options);
  return {store->keys, store->values};
}

at::Tensor KeyValueCache::attend(const CachedStep& step, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, double scale, std::optional<int64_t> window) {
  const int64_t rows = static_cast<int64_t>(step.rows.size());
  if (q.dim() != 4 || k.dim() != 4 || v.sizes() != k.sizes() || q.size(0) != rows || k.size(0) != rows ||
      q.size(2) != k.size(2) || q.size(3) != k.size(3) || q.size(1) % k.size(1) != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "KeyValueCache: q " + shape_text(q.sizes()) + ", k " +
                                                  shape_text(k.sizes()) + " and v " + shape_text(v.sizes()) +
                                                  " are not " + std::to_string(rows) +
                                                  " rows' [rows, heads, new, head_dim]");
  const int64_t kv_heads = k.size(1), group = q.size(1) / kv_heads, fresh = q.size(2), head_dim = q.size(3);
  const KeysValues store = stored(step, kv_heads, head_dim, k.options());

  // The new keys and values go to their rows' positions in place.
  const at::Tensor at_positions =
      step.positions.narrow(1, 0, step.keep).view({rows, 1, step.keep, 1}).expand({rows, kv_heads, step.keep, head_dim});
  store.keys.scatter_(2, at_positions, k.narrow(2, 0, step.keep));
  store.values.scatter_(2, at_positions, v.narrow(2, 0, step.keep));

  // A prompt on empty caches attends only to itself: causal attention over the new tokens.
  if (std::all_of(step.starts.begin(), step.starts.end(), [](int64_t start) { return start == 0; })) {
    if (!window)
      return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true,
                                              scale, /*enable_gqa=*/group > 1);
    const at::Tensor index = at::arange(fresh, at::TensorOptions().dtype(at::kLong).device(k.device()));
    return at::scaled_dot_product_attention(q, k, v, causal_visibility(index, index, window), /*dropout_p=*/0.0,
                                            /*is_causal=*/false, scale, /*enable_gqa=*/group > 1);
  }
  return attend_stored(step, q, store, scale, window);
}

at::Tensor KeyValueCache::attend_stored(const CachedStep& step, const at::Tensor& q, const KeysValues& stored,
                                        double scale, std::optional<int64_t> window) {
  const int64_t rows = q.size(0), kv_heads = stored.keys.size(1), group = q.size(1) / kv_heads;
  const int64_t fresh = q.size(2), head_dim = q.size(3);
  // The query heads of one key/value head read the same keys: side by side they are one query of
  // group x new tokens, so no key or value is repeated per query head.
  const at::Tensor grouped = q.reshape({rows, kv_heads, group * fresh, head_dim});
  const at::Tensor attended = at::scaled_dot_product_attention(
      grouped, stored.keys, stored.values, grouped_attention_mask(step, group, window, q.scalar_type()),
      /*dropout_p=*/0.0, /*is_causal=*/false, scale);
  return attended.reshape({rows, kv_heads * group, fresh, head_dim});
}

}  // namespace triax
