// Helpers of the generation-cache tests (inference_cache_test, mamba*_cache_test): the logits of a
// full forward and those computed through one InferenceCache per row, for any model plugin's
// model class that has forward, create_cache and forward_cached.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "triax/inference_cache.hpp"
#include "triax/model.hpp"

namespace cache_test {

// The logits of one full forward over ids: [rows, seq, padded vocab].
template <class Model>
at::Tensor full_logits(Model& model, const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  triax::StageInput input;
  input.input_ids = ids;
  input.want_logits = true;
  return model.forward(input).logits;
}

template <class Model>
std::vector<std::unique_ptr<triax::InferenceCache>> make_caches(Model& model, int64_t rows, int64_t max_tokens) {
  std::vector<std::unique_ptr<triax::InferenceCache>> caches;
  for (int64_t i = 0; i < rows; ++i) caches.push_back(model.create_cache(max_tokens));
  return caches;
}

inline std::vector<triax::InferenceCache*> pointers(const std::vector<std::unique_ptr<triax::InferenceCache>>& caches) {
  std::vector<triax::InferenceCache*> out;
  for (const auto& cache : caches) out.push_back(cache.get());
  return out;
}

// The logits of the new tokens ids, through the caches (one per row, advanced by ids' length).
template <class Model>
at::Tensor cached_logits(Model& model, const std::vector<triax::InferenceCache*>& caches, const at::Tensor& ids) {
  triax::StageInput input;
  input.input_ids = ids;
  return model.forward_cached(caches, input).logits;
}

}  // namespace cache_test
