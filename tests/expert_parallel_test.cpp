// The expert-parallel gradient path on real processes (mpirun, 4 ranks: dp 4 split into ep 2 x
// edp 2): the differentiable variable all-to-all against a reference, expert gradients reduced
// over edp and counted once in the global norm, and which rank owns which copy of a parameter.
// Every rank computes every other rank's inputs from formulas, so each builds the reference
// locally.
#include <ATen/ATen.h>

#include <cmath>

#include "multi_rank_environment.hpp"
#include "triax/parallel/data_parallel_gradients.hpp"
#include "triax/parallel/replica_ownership.hpp"
#include "triax/layers/all_to_all.hpp"

namespace triax {
namespace {

using testing::communicator;
using testing::world_size;

constexpr int kDp = 4, kEp = 2;

// Rows rank s sends to rank r: rank 1 sends none at all, rank 2 receives none at all.
int64_t rows_from_to(int s, int r) { return s == 1 || r == 2 ? 0 : (s + r) % 3 + 1; }
double sent_value(int s, int r, int64_t row, int64_t column) { return s + 0.1 * r + 0.01 * row + 0.001 * column; }
// The weight the loss gives row `row` (counted among everything rank r received) of column c.
double loss_weight(int r, int64_t row, int64_t column) { return std::sin(1.0 + r + 0.7 * row + 0.3 * column); }

TEST(AllToAllV, ForwardDeliversRowsAndBackwardReturnsTheirGradients) {
  TRIAX_REQUIRE_WORLD_SIZE(4);
  MpiCommunicator& comm = communicator({4, 1, 1});
  HostServices services(comm);
  const Host host(services.c_host());
  const int me = comm.rank(TRIAX_GROUP_WORLD);
  std::vector<int64_t> send, receive;
  for (int r = 0; r < 4; ++r) send.push_back(rows_from_to(me, r));
  for (int s = 0; s < 4; ++s) receive.push_back(rows_from_to(s, me));
  const bool exchange_sizes_ok = exchange_split_sizes(send, TRIAX_GROUP_WORLD, host, c10::kCPU) == receive;
  EXPECT_TRUE(exchange_sizes_ok);

  std::vector<at::Tensor> mine;
  for (int r = 0; r < 4; ++r)
    for (int64_t row = 0; row < send[static_cast<size_t>(r)]; ++row)
      mine.push_back(at::tensor({sent_value(me, r, row, 0), sent_value(me, r, row, 1)}, at::kDouble).view({1, 2}));
  at::Tensor x = (mine.empty() ? at::zeros({0, 2}, at::kDouble) : at::cat(mine)).requires_grad_(true);
  at::Tensor y = all_to_all_v(x, receive, send, TRIAX_GROUP_WORLD, host);

  int64_t position = 0;  // rows received in sender order
  at::Tensor weights = at::zeros_like(y);
  for (int s = 0; s < 4; ++s)
    for (int64_t row = 0; row < receive[static_cast<size_t>(s)]; ++row, ++position)
      for (int64_t c = 0; c < 2; ++c) {
        EXPECT_DOUBLE_EQ(y[position][c].item<double>(), sent_value(s, me, row, c)) << "from rank " << s;
        weights[position][c] = loss_weight(me, position, c);
      }
  (y * weights).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  ASSERT_EQ(x.grad().sizes(), x.sizes());

  // Row `row` sent to rank r landed after the rows r received from ranks before this one.
  position = 0;
  for (int r = 0; r < 4; ++r) {
    int64_t before = 0;
    for (int s = 0; s < me; ++s) before += rows_from_to(s, r);
    for (int64_t row = 0; row < send[static_cast<size_t>(r)]; ++row, ++position)
      for (int64_t c = 0; c < 2; ++c)
        EXPECT_DOUBLE_EQ(x.grad()[position][c].item<double>(), loss_weight(r, before + row, c)) << "to rank " << r;
  }
}

// A dense parameter and an expert shard: ep rank q holds experts [2q, 2q + 2) of 4.
std::vector<NamedParameter> expert_model(int ep_rank) {
  at::Tensor dense = at::zeros({5}), experts = at::zeros({2, 3});
  std::vector<NamedParameter> params{{"dense", dense, ParameterSpec::replicated(dense)},
                                     {"experts", experts, ParameterSpec::sharded({4, 3}, 0, 2 * ep_rank)}};
  params[1].spec.gradient_group = TRIAX_GROUP_EDP;
  return params;
}

// What dp rank r holds for parameter k after its backward (distinct per rank and parameter).
at::Tensor local_gradient(int r, int k, at::IntArrayRef shape) {
  return at::arange(at::ones(shape).numel(), at::kDouble).mul(0.3 + 0.2 * r).add(k).cos().to(at::kFloat).view(shape);
}

TEST(ExpertGradients, ReducedOverEdpDividedByDpAndCountedOnceInTheNorm) {
  TRIAX_REQUIRE_WORLD_SIZE(4);
  MpiCommunicator& comm = communicator({kDp, 1, 1, kEp});
  const ReplicaGroups groups = ReplicaGroups::of(comm);
  ASSERT_EQ(groups.size(TRIAX_GROUP_EDP), 2);
  const int dp_rank = groups.dp_rank, ep_rank = groups.rank(TRIAX_GROUP_EP);
  // The whole-model references: dense = mean over dp; the experts of ep rank q = the sum over the
  // dp ranks holding them (q and q + 2) divided by dp.
  at::Tensor dense = at::zeros({5}, at::kDouble);
  for (int r = 0; r < kDp; ++r) dense += local_gradient(r, 0, {5}).to(at::kDouble) / kDp;
  std::vector<at::Tensor> experts;
  for (int q = 0; q < kEp; ++q)
    experts.push_back(
        (local_gradient(q, 1, {2, 3}).to(at::kDouble) + local_gradient(q + 2, 1, {2, 3}).to(at::kDouble)) / kDp);
  const double norm = std::sqrt(dense.pow(2).sum().item<double>() + experts[0].pow(2).sum().item<double>() +
                                experts[1].pow(2).sum().item<double>());
  const ReplicaOwnership ownership(groups, [](const std::string&) { return true; });
  for (triax_gradient_sharding sharding : {TRIAX_GRADIENTS_WHOLE, TRIAX_GRADIENTS_DP_SHARDED}) {
    const bool sharded = sharding == TRIAX_GRADIENTS_DP_SHARDED;
    std::vector<NamedParameter> params = expert_model(ep_rank);
    DataParallelGradients reduction(params, sharding, 1 << 20, groups, ownership.counted_in_norm(params, sharded));
    ASSERT_EQ(reduction.bucket_members().size(), 2u) << "one bucket per (dtype, group)";
    std::vector<at::Tensor> local{local_gradient(dp_rank, 0, {5}), local_gradient(dp_rank, 1, {2, 3})};
    reduction.reduce_over_data_parallel(local, comm);
    const std::vector<at::Tensor>& reduced = reduction.for_optimizer();
    if (!sharded) {
      EXPECT_TRUE(at::allclose(reduced[0].to(at::kDouble), dense, 1e-6, 1e-7)) << reduced[0];
      EXPECT_TRUE(at::allclose(reduced[1].to(at::kDouble), experts[static_cast<size_t>(ep_rank)], 1e-6, 1e-7))
          << reduced[1];
    } else {  // this rank's ZeRO piece: over dp for the dense one, over edp for the experts
      const ZeroShard d = zero_shard(5, dp_rank, kDp), e = zero_shard(6, groups.rank(TRIAX_GROUP_EDP), 2);
      EXPECT_TRUE(at::allclose(reduced[0].to(at::kDouble), dense.narrow(0, d.offset, d.length), 1e-6, 1e-7));
      EXPECT_TRUE(at::allclose(reduced[1].to(at::kDouble),
                               experts[static_cast<size_t>(ep_rank)].view(-1).narrow(0, e.offset, e.length), 1e-6,
                               1e-7));
    }
    EXPECT_NEAR(reduction.clip(std::nullopt, comm).item<double>(), norm, 1e-5 * norm) << "sharding " << sharding;
  }
}

TEST(ReplicaOwnership, RankZeroOfEachGradientGroupOwnsTheCopy) {
  ParameterSpec dense, expert, replicated, tied;
  expert.gradient_group = TRIAX_GROUP_EDP;
  replicated.flags = TRIAX_PARAM_TP_REPLICATED;
  tied.flags = TRIAX_PARAM_TIED;
  tied.tied_key = "embedding";
  int dense_owners = 0, expert_owners = 0;
  for (int dp_rank = 0; dp_rank < kDp; ++dp_rank) {
    const ReplicaOwnership owner({dp_rank, kDp, kEp, 0}, [](const std::string&) { return true; });
    dense_owners += owner.owns_copy(dense) ? 1 : 0;
    expert_owners += owner.owns_copy(expert) ? 1 : 0;
    // dp ranks 0 and 1 (edp rank 0, ep ranks 0 and 1) each own their ep shard of the experts.
    EXPECT_EQ(owner.owns_copy(expert), dp_rank < kEp) << "dp rank " << dp_rank;
    EXPECT_TRUE(owner.owns_piece(expert)) << "every edp rank holds its own ZeRO piece";
  }
  EXPECT_EQ(dense_owners, 1);
  EXPECT_EQ(expert_owners, kEp);
  const ReplicaOwnership tp_rank_1({0, kDp, kEp, 1}, [](const std::string&) { return true; });
  EXPECT_FALSE(tp_rank_1.owns_copy(replicated));
  EXPECT_FALSE(tp_rank_1.owns_piece(replicated));
  EXPECT_TRUE(tp_rank_1.owns_copy(dense));
  const ReplicaOwnership later_stage({0, kDp, kEp, 0}, [](const std::string& key) { return key != "embedding"; });
  EXPECT_FALSE(later_stage.owns_copy(tied));
  EXPECT_EQ(later_stage.counted_in_norm({{"d", at::zeros({1}), dense}, {"t", at::zeros({1}), tied}}, false),
            (std::vector<bool>{true, false}));
}

}  // namespace
}  // namespace triax
