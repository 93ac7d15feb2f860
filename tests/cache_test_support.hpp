// Helpers of the generation-cache tests (inference_cache_test, mamba*_cache_test): the logits of a
// full forward and those computed through one InferenceCache per row, for any model plugin's
// model class that has forward, create_cache and forward_cached.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
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

// The logits of ids [rows, length] through fresh caches of `length` tokens: the first `prompt`
// tokens at once, then one at a time up to `singles_end`, then the rest at once.
template <class Model>
at::Tensor prompt_then_steps_logits(Model& model, const at::Tensor& ids, int64_t prompt, int64_t singles_end,
                                    std::vector<std::unique_ptr<triax::InferenceCache>>& caches) {
  const int64_t length = ids.size(1);
  caches = make_caches(model, ids.size(0), length);
  std::vector<at::Tensor> pieces{cached_logits(model, pointers(caches), ids.narrow(1, 0, prompt))};
  for (int64_t t = prompt; t < singles_end; ++t)
    pieces.push_back(cached_logits(model, pointers(caches), ids.narrow(1, t, 1)));
  pieces.push_back(cached_logits(model, pointers(caches), ids.narrow(1, singles_end, length - singles_end)));
  return at::cat(pieces, 1);
}

// A state that depends on the tokens seen, not on positions (the Mamba models'): rows a and b
// [1, length] cached up to a_prompt and b_prompt tokens on their own, then continued together by
// `step` tokens each, give the logits of their own full forwards (1e-5).
template <class Model>
void expect_rows_of_different_lengths_share_a_forward(Model& model, const at::Tensor& a, int64_t a_prompt,
                                                      const at::Tensor& b, int64_t b_prompt, int64_t step) {
  const at::Tensor expected_a = full_logits(model, a), expected_b = full_logits(model, b);
  auto caches = make_caches(model, 2, std::max(a.size(1), b.size(1)));
  cached_logits(model, {caches[0].get()}, a.narrow(1, 0, a_prompt));
  cached_logits(model, {caches[1].get()}, b.narrow(1, 0, b_prompt));
  const at::Tensor ids = at::cat({a.narrow(1, a_prompt, step), b.narrow(1, b_prompt, step)}, 0);
  const at::Tensor logits = cached_logits(model, pointers(caches), ids);
  EXPECT_LT((logits[0] - expected_a[0].narrow(0, a_prompt, step)).abs().max().item<double>(), 1e-5);
  EXPECT_LT((logits[1] - expected_b[0].narrow(0, b_prompt, step)).abs().max().item<double>(), 1e-5);
}

}  // namespace cache_test
