// Generation with the mamba2 plugin's cache (conv state + SSM state per sequence and layer): the
// logits computed through the caches, a prompt longer than a chunk then a few tokens at a time,
// equal those of one full forward (fp32, 1e-5), also for rows of different lengths in one batch.
#include <gtest/gtest.h>

#include <vector>

#include "cache_test_support.hpp"
#include "mamba2_test_support.hpp"
#include "triax/inference_cache.hpp"

namespace {

using namespace cache_test;
using namespace mamba2_test;

TEST(Mamba2Cache, PromptThenFewTokensAtATimeEqualsTheFullForward) {
  for (bool tied : {true, false}) {
    auto model = build(tiny_yaml(tied, "time_step_limit: [0.01, 0.8]\n"));  // chunks of 4
    const at::Tensor ids = random_tokens(2, 14, 11);
    const at::Tensor expected = full_logits(*model, ids);
    std::vector<std::unique_ptr<triax::InferenceCache>> caches;
    const at::Tensor cached = prompt_then_steps_logits(*model, ids, 6, 11, caches);
    EXPECT_LT(max_abs_diff(cached, expected), 1e-5) << (tied ? "tied" : "untied");
    EXPECT_EQ(caches[1]->length(), 14);
  }
}

// The state depends on the tokens seen, not on positions: rows of different lengths share a forward.
TEST(Mamba2Cache, RowsOfDifferentLengthsInOneBatch) {
  auto model = build(tiny_yaml(false));
  // a: 6 tokens, then 6..8 with b's 10..12 after b's first 10.
  expect_rows_of_different_lengths_share_a_forward(*model, random_tokens(1, 9, 12), 6, random_tokens(1, 13, 13), 10, 3);
}

}  // namespace
