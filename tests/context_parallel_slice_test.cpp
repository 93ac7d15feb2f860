// Which tokens each context-parallel rank holds (chunks i and 2·cp−1−i of 2·cp) and the attention
// mask over the gathered keys: for every rank, the rows of the one-rank causal (and windowed)
// mask that its queries read, over the columns of its gathered keys.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "triax/error.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/layers/context_parallel_slice.hpp"

namespace triax {
namespace {

at::Tensor longs(std::vector<int64_t> values) { return at::tensor(values, at::kLong); }

TEST(ContextParallelSlice, EachRankHoldsAnEarlyAndTheMirroredLateChunk) {
  const at::Tensor rows = at::arange(16, at::kLong).unsqueeze(0).repeat({2, 1});  // [2, 16]
  const ContextParallelSlice first(16, 0, 2), second(16, 1, 2);
  EXPECT_TRUE(first.of(rows).equal(longs({0, 1, 2, 3, 12, 13, 14, 15}).unsqueeze(0).repeat({2, 1})));
  EXPECT_TRUE(second.of(rows).equal(longs({4, 5, 6, 7, 8, 9, 10, 11}).unsqueeze(0).repeat({2, 1})));
  EXPECT_TRUE(second.token_indices(at::kCPU).equal(longs({4, 5, 6, 7, 8, 9, 10, 11})));
  EXPECT_TRUE(
      first.gathered_token_indices(at::kCPU).equal(longs({0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 8, 9, 10, 11})));
  const ContextParallelSlice cp4(16, 1, 4);
  EXPECT_TRUE(cp4.token_indices(at::kCPU).equal(longs({2, 3, 12, 13})));
}

TEST(ContextParallelSlice, RefusesASequenceThatTwiceCpChunksDoNotSplit) {
  try {
    ContextParallelSlice(12, 0, 4);
    ADD_FAILURE() << "12 tokens in 8 chunks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallelism.context_parallel_size (4)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("multiple of 8"), std::string::npos) << e.what();
  }
}

TEST(ContextParallelSlice, MaskIsTheOneRankMaskOfTheRanksQueriesAndGatheredKeys) {
  const int64_t sequence = 24;
  for (int size : {2, 3}) {
    for (std::optional<int64_t> window : {std::optional<int64_t>(), std::optional<int64_t>(5)}) {
      const at::Tensor index = at::arange(sequence, at::kLong);
      const at::Tensor whole = causal_visibility(index, index, window);
      for (int rank = 0; rank < size; ++rank) {
        ContextParallel cp;
        cp.rank = rank;
        cp.size = size;
        const ContextParallelSlice slice(sequence, rank, size);
        AttentionMasking masking;
        masking.sliding_window = window;
        const at::Tensor positions = slice.of(index.unsqueeze(0));
        const MaskedAttention masked =
            context_parallel_attention_inputs(masking, positions, slice.local_length(), cp, at::kCPU);
        const at::Tensor expected =
            whole.index_select(0, slice.token_indices(at::kCPU)).index_select(1, slice.gathered_token_indices(at::kCPU));
        EXPECT_TRUE(masked.mask.equal(expected)) << "cp " << size << " rank " << rank;
        EXPECT_TRUE(masked.position_ids.equal(positions));
      }
    }
  }
}

}  // namespace
}  // namespace triax
