// Generation with the Mamba plugin's cache (conv state + SSM state per sequence and layer): the
// logits computed through the caches, a prompt then token by token, equal those of one full forward
// over the whole sequence (fp32, 1e-5), for rows of different lengths in one batch, for rows
// regrouped between steps, and for two pipeline stages joined by hidden_out; the residual add left
// to the next layer's norm (TRIAX_MAMBA_ADD_NORM) changes no logit.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "cache_test_support.hpp"
#include "mamba_test_support.hpp"
#include "triax/inference_cache.hpp"

namespace {

using namespace cache_test;
using namespace mamba_test;

TEST(MambaCache, PromptThenOneTokenAtATimeEqualsTheFullForward) {
  for (bool tied : {true, false}) {
    auto model = build(tiny_yaml(tied));
    const at::Tensor ids = random_tokens(2, 12, 11);
    const at::Tensor expected = full_logits(*model, ids);
    auto caches = make_caches(*model, 2, 12);
    std::vector<at::Tensor> pieces{cached_logits(*model, pointers(caches), ids.narrow(1, 0, 5))};
    for (int64_t t = 5; t < 12; ++t) pieces.push_back(cached_logits(*model, pointers(caches), ids.narrow(1, t, 1)));
    EXPECT_LT(max_abs_diff(at::cat(pieces, 1), expected), 1e-5) << (tied ? "tied" : "untied");
    EXPECT_EQ(caches[1]->length(), 12);
  }
}

// The state depends on the tokens seen, not on positions: rows of different lengths share a forward.
TEST(MambaCache, RowsOfDifferentLengthsInOneBatch) {
  auto model = build(tiny_yaml(false));
  // a: 6 tokens, then 6..8 with b's 10..12 after b's first 10.
  expect_rows_of_different_lengths_share_a_forward(*model, random_tokens(1, 9, 12), 6, random_tokens(1, 13, 13), 10, 3);
}

// The rows of a forward share one store of states, read and written in place: prompts cached in
// groups, then decoded one token at a time together (one store for all), then in the other order
// and in a group of one (new stores, each row's states carried over) keep every row's logits
// those of its own full forward.
TEST(MambaCache, RowsRegroupedBetweenStepsKeepTheirStates) {
  auto model = build(tiny_yaml(true));
  const at::Tensor ids = random_tokens(3, 12, 41);
  const at::Tensor expected = full_logits(*model, ids);
  auto caches = make_caches(*model, 3, 12);
  std::vector<at::Tensor> logits(3);
  auto keep = [&](const std::vector<int64_t>& rows, const at::Tensor& out) {
    for (size_t i = 0; i < rows.size(); ++i) {
      at::Tensor& row = logits[static_cast<size_t>(rows[i])];
      row = row.defined() ? at::cat({row, out[static_cast<int64_t>(i)]}, 0) : out[static_cast<int64_t>(i)];
    }
  };
  keep({0, 1}, cached_logits(*model, {caches[0].get(), caches[1].get()}, ids.narrow(0, 0, 2).narrow(1, 0, 4)));
  keep({2}, cached_logits(*model, {caches[2].get()}, ids.narrow(0, 2, 1).narrow(1, 0, 4)));
  const std::vector<std::vector<int64_t>> steps{{0, 1, 2}, {0, 1, 2}, {2, 1, 0}, {2, 1, 0}, {1}, {0, 2}};
  for (size_t k = 0; k < steps.size(); ++k) {
    const std::vector<int64_t>& rows = steps[k];
    std::vector<triax::InferenceCache*> row_caches;
    std::vector<at::Tensor> next;
    for (int64_t row : rows) {
      row_caches.push_back(caches[static_cast<size_t>(row)].get());
      next.push_back(ids[row].narrow(0, row_caches.back()->length(), 1));
    }
    keep(rows, cached_logits(*model, row_caches, at::stack(next)));
  }
  for (int64_t row = 0; row < 3; ++row) {
    const at::Tensor& got = logits[static_cast<size_t>(row)];
    EXPECT_LT(max_abs_diff(got, expected[row].narrow(0, 0, got.size(0))), 1e-5) << "row " << row;
  }
}

// TRIAX_MAMBA_ADD_NORM: each layer's residual add left to the next layer's norm (the fp32
// residual's add, cast and norm, add_rms_norm_fp32_residual) gives the logits of the layers that
// add at their end, bit for bit on the CPU, prompt and steps alike.
TEST(MambaCache, AddLeftToTheNextNormKeepsTheLogits) {
  auto fused = build(tiny_yaml(false)), unfused = build_unfused(tiny_yaml(false));
  const at::Tensor ids = random_tokens(2, 9, 17);
  std::vector<std::unique_ptr<triax::InferenceCache>> fused_caches, unfused_caches;
  const at::Tensor got = prompt_then_steps_logits(*fused, ids, 4, 7, fused_caches);
  EXPECT_TRUE(at::equal(got, prompt_then_steps_logits(*unfused, ids, 4, 7, unfused_caches)));
  EXPECT_LT(max_abs_diff(got, full_logits(*fused, ids)), 1e-5);
}

TEST(MambaCache, PipelineStagesJoinedByHiddenOut) {
  for (bool fp32_residual : {true, false}) {
    const std::string yaml = tiny_yaml(true, fp32_residual ? "" : "residual_in_fp32: false\n");
    auto whole = build(yaml);
    auto first = build(yaml, tiny_model_context(0, 2, 0, 2));   // embedding + layer 0
    auto second = build(yaml, tiny_model_context(2, 4, 1, 2));  // layer 1 + head (tied: its own embedding copy)
    const at::Tensor ids = random_tokens(2, 9, 21);
    const at::Tensor expected = full_logits(*whole, ids);
    auto caches0 = make_caches(*first, 2, 9), caches1 = make_caches(*second, 2, 9);
    std::vector<at::Tensor> pieces;
    for (auto [start, count] : std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 1}, {5, 1}, {6, 3}}) {
      triax::StageInput input;
      input.input_ids = ids.narrow(1, start, count);
      triax::StageOutput out0 = first->forward_cached(pointers(caches0), input);
      ASSERT_TRUE(out0.hidden_out.defined());
      input.hidden_in = out0.hidden_out;
      pieces.push_back(second->forward_cached(pointers(caches1), input).logits);
    }
    EXPECT_LT(max_abs_diff(at::cat(pieces, 1), expected), 1e-5);
  }
}

}  // namespace
