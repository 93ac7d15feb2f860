// The keys and values one attention layer keeps of one sequence for inference with a cache
// (triax/causal_lm.hpp): this tp rank's K/V heads, room for `capacity` tokens, allocated on the
// first forward in the keys' dtype and device.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "triax/inference_cache.hpp"

namespace triax {

class KeyValueCache : public LayerCache {
 public:
  explicit KeyValueCache(int64_t capacity) : capacity_(capacity) {}

  // Causal attention of new tokens at positions start..start+new-1 over the `start` cached
  // tokens and themselves; then stores the first `keep` new keys and values after the cached ones.
  // q: [1, heads, new, head_dim]; k, v: [1, kv_heads, new, head_dim] (grouped-query attention
  // when heads > kv_heads), rotary already applied. Returns [1, heads, new, head_dim]. `window`:
  // a query sees only the last `window` positions, itself included (attention_mask.hpp).
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t start, int64_t keep,
                    double scale, std::optional<int64_t> window = std::nullopt);

 private:
  int64_t capacity_;
  at::Tensor keys_, values_;  // [1, kv_heads, capacity, head_dim]
};

}  // namespace triax
