// The MoE block with DeepSeek-V3 / Nemotron-H routing (sigmoid scores, a correction bias,
// group-limited top-k, renormalised and scaled gates; squared-ReLU experts, an ungated shared
// expert) on real processes (mpirun, 2 ranks: dp 2 = ep 2, each rank holding half the experts and
// its own micro-batch), against the same block on one rank: outputs, router statistics and every
// gradient, through both token dispatchers. Every rank builds the one-rank reference locally
// from the same seeds.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "moe_block.hpp"
#include "multi_rank_environment.hpp"

namespace triax::moe {
namespace {

using testing::communicator;

constexpr int kRanks = 2;
constexpr double kTolerance = 1e-5;

MoeBlockOptions nemotron_h_like(TokenDispatcher::Kind dispatcher) {
  MoeBlockOptions o;
  o.hidden_size = 16;
  o.num_experts = 8;
  o.top_k = 3;
  o.expert_intermediate_size = 12;
  o.score = RouterScore::Sigmoid;
  o.n_group = 4;
  o.topk_group = 2;
  o.routed_scaling_factor = 2.5;
  o.activation = ExpertActivation::SquaredRelu;
  o.shared_expert = SharedExpert::Ungated;
  o.shared_expert_intermediate_size = 20;
  o.dispatcher = dispatcher;
  return o;
}

void randomize(torch::nn::Module& module) {
  at::manual_seed(21);
  at::NoGradGuard no_grad;
  for (auto& p : module.parameters()) p.normal_(0.0, 0.3);
}

// The whole block's values into a block holding this ep rank's experts (dim 0 of the expert tensors).
void copy_into_shard(MoeBlock& whole, MoeBlock& shard, int ep_rank) {
  at::NoGradGuard no_grad;
  auto source = whole.named_parameters();
  for (auto& p : shard.named_parameters()) {
    const at::Tensor& value = source[p.key()];
    const int64_t rows = p.value().size(0);
    p.value().copy_(value.size(0) == rows ? value : value.narrow(0, ep_rank * rows, rows));
  }
}

double max_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// The loss each rank's micro-batch adds: the output against fixed weights and both router losses.
at::Tensor micro_batch_loss(MoeBlock& block, const at::Tensor& x, const at::Tensor& weights, at::Tensor& out) {
  out = block.forward(x);
  const std::optional<RouterStatistics> s = block.take_statistics();
  EXPECT_TRUE(s.has_value());
  at::Tensor loss = (out * weights).sum();
  return s ? loss + s->balance * 0.1 + s->z_loss * 0.01 : loss;
}

TEST(MoeBlockExpertParallel, GroupLimitedSigmoidRoutingEqualsOneRank) {
  TRIAX_REQUIRE_WORLD_SIZE(kRanks);
  MpiCommunicator& comm = communicator({kRanks, 1, 1, kRanks});
  HostServices services(comm);
  const int rank = comm.rank(TRIAX_GROUP_WORLD);
  ModelContext context;
  context.dp_rank = context.ep_rank = rank;
  context.dp_size = context.ep_size = kRanks;
  context.host = Host(services.c_host());

  for (const auto dispatcher : {TokenDispatcher::Kind::AllToAll, TokenDispatcher::Kind::AllGather}) {
    SCOPED_TRACE(dispatcher == TokenDispatcher::Kind::AllToAll ? "alltoall" : "allgather");
    const MoeBlockOptions options = nemotron_h_like(dispatcher);
    MoeBlock whole(options, ModelContext{}), shard(options, context);
    randomize(whole);
    {
      at::NoGradGuard no_grad;  // a bias that changes the choice of some tokens
      whole.gate->e_score_correction->bias.normal_(0.0, 0.2);
    }
    copy_into_shard(whole, shard, rank);
    at::manual_seed(22);
    const at::Tensor x = at::randn({2 * kRanks, 6, 16}), weights = at::randn({2 * kRanks, 6, 16});

    // One rank: both micro-batches through the whole block, their losses added (as dp adds gradients).
    const at::Tensor x_whole = x.clone().requires_grad_(true);
    std::vector<at::Tensor> whole_out(kRanks);
    at::Tensor whole_loss;
    for (int r = 0; r < kRanks; ++r) {
      const at::Tensor loss = micro_batch_loss(whole, x_whole.narrow(0, 2 * r, 2), weights.narrow(0, 2 * r, 2), whole_out[r]);
      whole_loss = whole_loss.defined() ? whole_loss + loss : loss;
    }
    whole_loss.backward();

    // ep 2: this rank's micro-batch, the experts' rows exchanged with the other rank.
    const at::Tensor x_mine = x.narrow(0, 2 * rank, 2).clone().requires_grad_(true);
    at::Tensor out;
    micro_batch_loss(shard, x_mine, weights.narrow(0, 2 * rank, 2), out).backward();

    EXPECT_LT(max_difference(out, whole_out[rank]), kTolerance) << "output";
    EXPECT_LT(max_difference(x_mine.grad(), x_whole.grad().narrow(0, 2 * rank, 2)), kTolerance) << "input gradient";
    auto whole_parameters = whole.named_parameters();
    for (auto& p : shard.named_parameters()) {
      const at::Tensor& reference = whole_parameters[p.key()];
      if (p.key() == "gate.e_score_correction.bias") {
        EXPECT_FALSE(p.value().grad().defined()) << "the correction bias takes no gradient";
        continue;
      }
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      at::Tensor grad = p.value().grad().clone();
      const bool expert = p.value().size(0) != reference.size(0);
      // Replicated parameters: each rank holds its micro-batch's share, summed as dp would.
      if (!expert) context.host.all_reduce(TRIAX_GROUP_DP, grad);
      const at::Tensor expected = expert ? reference.grad().narrow(0, rank * grad.size(0), grad.size(0)) : reference.grad();
      EXPECT_LT(max_difference(grad, expected), kTolerance) << p.key();
    }
  }
}

}  // namespace
}  // namespace triax::moe
