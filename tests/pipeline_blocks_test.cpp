// Assignment of a model's pipeline blocks to pipeline ranks.
#include <gtest/gtest.h>

#include "triax/error.hpp"
#include "step/pipeline_blocks.hpp"

namespace triax {
namespace {

std::vector<int> counts(const std::vector<StageBlocks>& stages) {
  std::vector<int> out;
  for (const auto& s : stages) out.push_back(s.count());
  return out;
}

TEST(PipelineBlocks, BalancesContiguousRunsByCost) {
  // A Llama shape: a cheap embedding, four equal layers, a head as costly as two layers.
  const std::vector<double> costs = {0.1, 1, 1, 1, 1, 2};
  EXPECT_EQ(counts(partition_pipeline_blocks(costs, 1)), (std::vector<int>{6}));
  EXPECT_EQ(counts(partition_pipeline_blocks(costs, 2)), (std::vector<int>{4, 2}));  // 3.1 | 3
  const auto three = partition_pipeline_blocks(costs, 3);                           // 2.1 | 2 | 2
  EXPECT_EQ(counts(three), (std::vector<int>{3, 2, 1}));
  EXPECT_EQ(three.front().first, 0);
  EXPECT_EQ(three.back().last, 6);
  for (size_t i = 1; i < three.size(); ++i) EXPECT_EQ(three[i].first, three[i - 1].last);
}

TEST(PipelineBlocks, EveryRankGetsABlockEvenWhenOneBlockDominates) {
  const auto stages = partition_pipeline_blocks({100, 1, 1, 1}, 4);
  EXPECT_EQ(counts(stages), (std::vector<int>{1, 1, 1, 1}));
}

TEST(PipelineBlocks, ExplicitSplitOverridesTheBalance) {
  const auto stages = partition_pipeline_blocks({0.1, 1, 1, 1, 1, 2}, 2, std::vector<int>{2, 4});
  EXPECT_EQ(counts(stages), (std::vector<int>{2, 4}));
  const auto blocks = assign_pipeline_blocks({0.1, 1, 1, 1, 1, 2}, stages);
  ASSERT_EQ(blocks.size(), 6u);
  EXPECT_EQ(blocks[1].pp_rank, 0);
  EXPECT_EQ(blocks[2].pp_rank, 1);
  EXPECT_EQ(describe_pipeline({1, 1, 1, 1}, partition_pipeline_blocks({1, 1, 1, 1}, 2)),
            "rank 0: blocks [0, 2) 50% of the compute, rank 1: blocks [2, 4) 50% of the compute");
}

TEST(PipelineBlocks, RefusesImpossibleRequestsWithTheKey) {
  try {
    partition_pipeline_blocks({1, 1, 1}, 4);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallelism.pp (4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(partition_pipeline_blocks({1, 1, 1}, 2, std::vector<int>{1, 1}), ConfigError);
  EXPECT_THROW(partition_pipeline_blocks({1, 1, 1}, 2, std::vector<int>{3, 0}), ConfigError);
  EXPECT_THROW(partition_pipeline_blocks({1, 1, 1}, 2, std::vector<int>{3}), ConfigError);
}

TEST(PipelineBlocks, VirtualStagesGiveEachRankOneRunPerChunk) {
  // Eight blocks, two chunks on each of two ranks: four runs; rank 0 holds runs 0 and 2.
  const std::vector<double> costs = {1, 1, 1, 1, 1, 1, 1, 1};
  const auto stages = partition_virtual_stages(costs, 2, 2);
  EXPECT_EQ(counts(stages), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(describe_virtual_stages(costs, stages, 2),
            "rank 0: chunk 0 blocks [0, 2), chunk 1 blocks [4, 6) 50% of the compute; "
            "rank 1: chunk 0 blocks [2, 4), chunk 1 blocks [6, 8) 50% of the compute");
  // One chunk is the plain split, described as before.
  EXPECT_EQ(counts(partition_virtual_stages({0.1, 1, 1, 1, 1, 2}, 2, 1)), (std::vector<int>{4, 2}));
  EXPECT_EQ(describe_virtual_stages({1, 1, 1, 1}, partition_virtual_stages({1, 1, 1, 1}, 2, 1), 2),
            describe_pipeline({1, 1, 1, 1}, partition_pipeline_blocks({1, 1, 1, 1}, 2)));
  // An explicit split counts per virtual stage.
  EXPECT_EQ(counts(partition_virtual_stages(costs, 2, 2, std::vector<int>{1, 3, 3, 1})),
            (std::vector<int>{1, 3, 3, 1}));
}

TEST(PipelineBlocks, RefusesMoreVirtualStagesThanBlocksNamingTheKey) {
  try {
    partition_virtual_stages({1, 1, 1, 1, 1, 1}, 4, 2);  // 8 virtual stages for 6 blocks
    FAIL();
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("parallelism.pp_chunks_per_rank", 0), 0u) << message;
    EXPECT_NE(message.find("8 virtual stages"), std::string::npos) << message;
    EXPECT_NE(message.find("6 pipeline blocks"), std::string::npos) << message;
  }
  try {
    partition_virtual_stages({1, 1, 1, 1}, 2, 2, std::vector<int>{2, 2});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 4 counts (one per virtual stage"), std::string::npos) << e.what();
  }
  EXPECT_THROW(partition_virtual_stages({1, 1, 1, 1}, 2, 0), ConfigError);
}

}  // namespace
}  // namespace triax
