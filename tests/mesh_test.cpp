// The process mesh's rank arithmetic and groups.
#include <gtest/gtest.h>

#include "triax/core/comm/parallel_context.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

TEST(ParallelContext, RankArithmeticPutsTensorParallelFastest) {
  const MeshShape shape{2, 2, 2};
  for (int r = 0; r < 8; ++r) {
    const MeshCoordinates at = ParallelContext::coordinates_of(shape, r);
    EXPECT_EQ(r, at.tp + at.pp * 2 + at.dp * 4);
    EXPECT_EQ(r, ParallelContext::rank_of(shape, at));
  }
  const ParallelContext rank5(shape, 5);  // tp 1, pp 0, dp 1
  EXPECT_EQ(rank5.coordinates().tp, 1);
  EXPECT_EQ(rank5.coordinates().pp, 0);
  EXPECT_EQ(rank5.coordinates().dp, 1);
}

TEST(ParallelContext, GroupsHoldTheExpectedRanks) {
  const ParallelContext context(MeshShape{2, 2, 2}, 5);
  EXPECT_EQ(context.members(TRIAX_GROUP_TP), (std::vector<int>{4, 5}));
  EXPECT_EQ(context.members(TRIAX_GROUP_PP), (std::vector<int>{5, 7}));
  EXPECT_EQ(context.members(TRIAX_GROUP_DP), (std::vector<int>{1, 5}));
  EXPECT_EQ(context.members(TRIAX_GROUP_MP), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(context.rank(TRIAX_GROUP_TP), 1);
  EXPECT_EQ(context.rank(TRIAX_GROUP_DP), 1);
  EXPECT_EQ(context.rank(TRIAX_GROUP_MP), 1);
  EXPECT_EQ(context.size(TRIAX_GROUP_WORLD), 8);
  EXPECT_EQ(context.previous_pipeline_rank(), -1);
  EXPECT_EQ(context.next_pipeline_rank(), 7);
}

TEST(ParallelContext, GroupsOfAKindPartitionTheWorld) {
  const MeshShape shape{2, 4, 1, 2};
  const ParallelContext context(shape, 0);
  for (triax_group kind :
       {TRIAX_GROUP_TP, TRIAX_GROUP_PP, TRIAX_GROUP_DP, TRIAX_GROUP_MP, TRIAX_GROUP_EP, TRIAX_GROUP_EDP}) {
    std::vector<int> seen(8, 0);
    for (const auto& group : context.all_groups(kind))
      for (int r : group) ++seen[static_cast<size_t>(r)];
    EXPECT_EQ(seen, std::vector<int>(8, 1)) << group_name(kind);
  }
  for (int r = 0; r < 8; ++r) {
    const ParallelContext other(shape, r);
    EXPECT_EQ(other.all_groups(TRIAX_GROUP_PP)[static_cast<size_t>(other.group_index(TRIAX_GROUP_PP))],
              other.members(TRIAX_GROUP_PP));
  }
}

TEST(ParallelContext, DescribePrintsTheTableAndGroups) {
  const std::string text = ParallelContext::describe(MeshShape{2, 1, 2});
  EXPECT_NE(text.find("4 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("tp groups: [0 1] [2 3]"), std::string::npos) << text;
  EXPECT_NE(text.find("dp groups: [0 2] [1 3]"), std::string::npos) << text;
}

// dp 4 split into ep 2 x edp 2, ep fastest: dp_rank = edp_rank * ep + ep_rank.
TEST(ParallelContext, ExpertGroupsSplitDataParallelWithEpFastest) {
  const MeshShape shape{4, 2, 1, 2};  // dp 4, pp 2: world rank = pp + 2 * dp
  for (int r = 0; r < 8; ++r) {
    const ParallelContext context(shape, r);
    const int dp_rank = context.rank(TRIAX_GROUP_DP);
    EXPECT_EQ(dp_rank, context.rank(TRIAX_GROUP_EDP) * 2 + context.rank(TRIAX_GROUP_EP)) << "rank " << r;
    EXPECT_EQ(context.size(TRIAX_GROUP_EP), 2);
    EXPECT_EQ(context.size(TRIAX_GROUP_EDP), 2);
  }
  const ParallelContext rank3(shape, 3);  // pp 1, dp 1: ep rank 1, edp rank 0
  EXPECT_EQ(rank3.members(TRIAX_GROUP_DP), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(rank3.members(TRIAX_GROUP_EP), (std::vector<int>{1, 3}));
  EXPECT_EQ(rank3.members(TRIAX_GROUP_EDP), (std::vector<int>{3, 7}));
  const ParallelContext rank4(shape, 4);  // pp 0, dp 2: ep rank 0, edp rank 1
  EXPECT_EQ(rank4.members(TRIAX_GROUP_EP), (std::vector<int>{4, 6}));
  EXPECT_EQ(rank4.members(TRIAX_GROUP_EDP), (std::vector<int>{0, 4}));
  EXPECT_EQ(rank4.rank(TRIAX_GROUP_EDP), 1);
}

TEST(ParallelContext, DescribePrintsExpertGroups) {
  const std::string text = ParallelContext::describe(MeshShape{4, 1, 1, 2});
  EXPECT_NE(text.find("ep groups: [0 1] [2 3]"), std::string::npos) << text;
  EXPECT_NE(text.find("edp groups: [0 2] [1 3]"), std::string::npos) << text;
  EXPECT_NE(text.find(" ep edp "), std::string::npos) << text;
  EXPECT_EQ(ParallelContext::describe(MeshShape{4, 1, 1}).find("edp"), std::string::npos);
}

// cp sits between tp and pp: rank = tp + cp * TP + pp * TP * CP + dp * TP * CP * PP.
TEST(ParallelContext, ContextParallelSitsNextToTensorParallel) {
  const MeshShape shape{2, 2, 2, 1, 2};  // dp 2, pp 2, tp 2, cp 2: 16 ranks
  ASSERT_EQ(shape.world_size(), 16);
  for (int r = 0; r < 16; ++r) {
    const MeshCoordinates at = ParallelContext::coordinates_of(shape, r);
    EXPECT_EQ(r, at.tp + at.cp * 2 + at.pp * 4 + at.dp * 8);
    EXPECT_EQ(r, ParallelContext::rank_of(shape, at));
  }
  const ParallelContext rank11(shape, 11);  // tp 1, cp 1, pp 0, dp 1
  EXPECT_EQ(rank11.members(TRIAX_GROUP_TP), (std::vector<int>{10, 11}));
  EXPECT_EQ(rank11.members(TRIAX_GROUP_CP), (std::vector<int>{9, 11}));
  EXPECT_EQ(rank11.members(TRIAX_GROUP_PP), (std::vector<int>{11, 15}));
  EXPECT_EQ(rank11.members(TRIAX_GROUP_DP), (std::vector<int>{3, 11}));
  EXPECT_EQ(rank11.members(TRIAX_GROUP_MP), (std::vector<int>{10, 11, 14, 15}));
  // dp-major: dp_cp rank = dp_rank * cp + cp_rank (the host's ZeRO shards rely on it).
  EXPECT_EQ(rank11.members(TRIAX_GROUP_DP_CP), (std::vector<int>{1, 3, 9, 11}));
  EXPECT_EQ(rank11.rank(TRIAX_GROUP_DP_CP), 3);
  EXPECT_EQ(rank11.rank(TRIAX_GROUP_CP), 1);
  EXPECT_EQ(rank11.previous_pipeline_rank(), -1);
  EXPECT_EQ(rank11.next_pipeline_rank(), 15);
  for (triax_group kind : {TRIAX_GROUP_CP, TRIAX_GROUP_DP_CP, TRIAX_GROUP_EDP_CP}) {
    std::vector<int> seen(16, 0);
    for (const auto& group : rank11.all_groups(kind))
      for (int r : group) ++seen[static_cast<size_t>(r)];
    EXPECT_EQ(seen, std::vector<int>(16, 1)) << group_name(kind);
  }
}

TEST(ParallelContext, ExpertGroupsWidenedByContextParallel) {
  const MeshShape shape{4, 1, 1, 2, 2};  // dp 4 = edp 2 x ep 2, cp 2: world rank = cp + 2 * dp
  const ParallelContext rank3(shape, 3);   // cp 1, dp 1: ep rank 1, edp rank 0
  EXPECT_EQ(rank3.members(TRIAX_GROUP_EDP), (std::vector<int>{3, 7}));
  EXPECT_EQ(rank3.members(TRIAX_GROUP_EDP_CP), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(rank3.rank(TRIAX_GROUP_EDP_CP), 1);  // edp_rank * cp + cp_rank
  EXPECT_EQ(with_context_parallel(TRIAX_GROUP_DP, 2), TRIAX_GROUP_DP_CP);
  EXPECT_EQ(with_context_parallel(TRIAX_GROUP_EDP, 2), TRIAX_GROUP_EDP_CP);
  EXPECT_EQ(with_context_parallel(TRIAX_GROUP_DP, 1), TRIAX_GROUP_DP);
}

TEST(ParallelContext, DescribePrintsContextParallelGroups) {
  const std::string text = ParallelContext::describe(MeshShape{2, 1, 2, 1, 2});
  EXPECT_NE(text.find("mesh dp=2 pp=1 tp=2 cp=2: 8 ranks, rank = tp_rank + cp_rank*2 + pp_rank*4 + dp_rank*4"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cp groups: [0 2] [1 3] [4 6] [5 7]"), std::string::npos) << text;
  EXPECT_NE(text.find("dp_cp groups: [0 2 4 6] [1 3 5 7]"), std::string::npos) << text;
  EXPECT_EQ(ParallelContext::describe(MeshShape{2, 1, 2}).find("cp"), std::string::npos);
}

TEST(ParallelContext, RefusesImpossibleShapes) {
  try {
    MeshShape{1, 1, 1, 1, 0}.validate();
    ADD_FAILURE() << "cp 0";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallelism.context_parallel_size"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParallelContext(MeshShape{3, 1, 1, 2}, 0), ConfigError);
  try {
    MeshShape{6, 1, 1, 4}.validate();
    ADD_FAILURE() << "ep 4 does not divide dp 6";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallelism.expert_parallel_size"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParallelContext(MeshShape{0, 1, 1}, 0), ConfigError);
  EXPECT_THROW(ParallelContext(MeshShape{2, 1, 1}, 2), Error);
}

}  // namespace
}  // namespace triax
