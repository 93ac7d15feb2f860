// The keys and values one attention layer keeps of a sequence for inference with a cache
// (triax/causal_lm.hpp): this tp rank's K/V heads, room for `capacity` tokens.
//
// Each sequence has its own KeyValueCache, but the rows of one forward share one store:
// [rows, kv_heads, capacity, head_dim] keys and values, zero-filled and allocated to the largest
// capacity among them, so that one attention call serves the whole batch (each row masked to its
// own length) and new tokens are written in place, never concatenated. The first forward that
// sees a set of rows together gives them a store (each row's cached tokens copied in once); the
// next forwards over the same rows in the same order read and write it where it is.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "triax/inference_cache.hpp"

namespace triax {

struct CachedStep;

class KeyValueCache : public LayerCache {
 public:
  explicit KeyValueCache(int64_t capacity) : capacity_(capacity) {}

  // Causal attention of the new tokens of step.rows (each a KeyValueCache) over their cached
  // tokens and themselves; stores the first step.keep new keys and values of each row at its
  // step.positions. q: [rows, heads, new, head_dim]; k, v: [rows, kv_heads, new, head_dim]
  // (grouped-query attention when heads is a multiple of kv_heads), rotary already applied.
  // Returns [rows, heads, new, head_dim]. `window`: a query sees only the last `window`
  // positions, itself included (attention_mask.hpp).
  static at::Tensor attend(const CachedStep& step, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double scale, std::optional<int64_t> window = std::nullopt);

  // A decoding step's parts of attend(), for a caller that writes the new keys and values itself
  // (rotary_qkv_into_cache): first the keys and values [rows, kv_heads, capacity, head_dim] the
  // rows of `step` share, checked to hold step.keep more tokens of each row; then, once the new
  // ones are in, the new tokens' attention over them (not for a prompt on empty caches).
  struct KeysValues {
    at::Tensor keys, values;
  };
  static KeysValues stored(const CachedStep& step, int64_t kv_heads, int64_t head_dim,
                           const at::TensorOptions& options);
  static at::Tensor attend_stored(const CachedStep& step, const at::Tensor& q, const KeysValues& stored, double scale,
                                  std::optional<int64_t> window = std::nullopt);

 private:
  struct Store {
    at::Tensor keys, values;  // [rows, kv_heads, capacity, head_dim]
  };
  // The store the rows of `step` share, made (and filled with their cached tokens) when they do
  // not share one yet in this order, capacity, dtype and device.
  static std::shared_ptr<Store> shared_store(const CachedStep& step, int64_t kv_heads, int64_t head_dim,
                                             const at::TensorOptions& options);

  int64_t capacity_;
  std::shared_ptr<Store> store_;  // null before the sequence's first forward
  int64_t slot_ = 0;              // this sequence's row of the store
};

}  // namespace triax
