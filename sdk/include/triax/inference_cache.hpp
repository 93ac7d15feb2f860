// Inference with a cache (generation): what a model keeps of one sequence between forwards, so
// that each new token costs one token's compute instead of the whole prefix's.
//
// A model returns one InferenceCache per sequence from Model::create_cache; the host hands it
// back to Model::forward_cached, once per row of a batch, and destroys it through the ABI
// (triax_model_vtable.cache_destroy). What a cache holds is the model's business: K/V of its
// attention layers, conv and SSM state of Mamba layers. It belongs to the model instance (one
// pipeline stage, one tp rank) that made it.
#pragma once

#include <cstdint>

namespace triax {

class InferenceCache {
 public:
  explicit InferenceCache(int64_t capacity) : capacity_(capacity) {}
  virtual ~InferenceCache() = default;
  InferenceCache(const InferenceCache&) = delete;
  InferenceCache& operator=(const InferenceCache&) = delete;

  // Tokens of the sequence seen so far: the next token's position.
  int64_t length() const { return length_; }
  // The most tokens it can hold (cache_create's max_tokens).
  int64_t capacity() const { return capacity_; }

 protected:
  // Called by the model once a forward has stored `tokens` more tokens.
  void advance(int64_t tokens) { length_ += tokens; }

 private:
  int64_t capacity_ = 0;
  int64_t length_ = 0;
};

// The part of a sequence's cache that belongs to one layer (triax/causal_lm.hpp builds a cache
// from one of these per layer of the stage): a KeyValueCache for attention, conv and SSM state
// for a Mamba layer.
class LayerCache {
 public:
  virtual ~LayerCache() = default;
};

}  // namespace triax
