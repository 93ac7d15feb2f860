// The mpi backend against known values: every operation over every group kind of several meshes,
// at 2 and at 4 ranks (the same executable, registered twice). Each rank fills its tensors from
// its world rank, so the expected result follows from the group's members alone.
#include <ATen/ATen.h>

#include <cstddef>
#include <numeric>
#include <string>

#include "multi_rank_environment.hpp"
#include "triax/host.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {
namespace {

using testing::communicator;
using testing::world_size;

std::vector<MeshShape> meshes_of_this_world() {
  if (world_size() == 2) return {{2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {1, 1, 1, 1, 2}};
  if (world_size() == 4) return {{2, 1, 2}, {1, 2, 2}, {2, 2, 1}, {4, 1, 1, 2}, {2, 1, 1, 2, 2}, {1, 1, 2, 1, 2}};
  return {{world_size(), 1, 1}};
}

std::vector<triax_group> group_kinds(const MeshShape& shape) {
  std::vector<triax_group> kinds = {TRIAX_GROUP_WORLD, TRIAX_GROUP_TP, TRIAX_GROUP_PP, TRIAX_GROUP_DP, TRIAX_GROUP_MP};
  if (shape.ep > 1) kinds.insert(kinds.end(), {TRIAX_GROUP_EP, TRIAX_GROUP_EDP});
  if (shape.cp > 1) kinds.insert(kinds.end(), {TRIAX_GROUP_CP, TRIAX_GROUP_DP_CP});
  if (shape.cp > 1 && shape.ep > 1) kinds.push_back(TRIAX_GROUP_EDP_CP);
  return kinds;
}

std::string where(const MeshShape& shape, triax_group group, at::ScalarType dtype = at::kFloat) {
  return "mesh dp" + std::to_string(shape.dp) + " pp" + std::to_string(shape.pp) + " tp" + std::to_string(shape.tp) +
         " ep" + std::to_string(shape.ep) + " cp" + std::to_string(shape.cp) + ", " + group_name(group) + " group, " + c10::toString(dtype);
}

const std::vector<at::ScalarType> kDtypes = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf,
                                             at::kLong,  at::kInt,    at::kByte};

// Every rank's value: small integers, exact in every dtype (uint8 included).
double value_of(int world_rank) { return world_rank + 1; }

TEST(MpiCommunicator, AllReduceSumAvgMaxMinOverEveryGroup) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    MpiCommunicator& comm = communicator(shape);
    for (triax_group group : group_kinds(shape)) {
      const std::vector<int> members = comm.context().members(group);
      std::vector<double> values;
      for (int m : members) values.push_back(value_of(m));
      const double sum = std::accumulate(values.begin(), values.end(), 0.0);
      const double max = *std::max_element(values.begin(), values.end());
      const double min = *std::min_element(values.begin(), values.end());
      for (at::ScalarType dtype : kDtypes) {
        const double mine = value_of(comm.context().world_rank());
        const bool integral = !at::isFloatingType(dtype);
        const double avg = integral ? std::trunc(sum / members.size()) : sum / members.size();
        const std::vector<std::pair<triax_reduce_op, double>> cases = {
            {TRIAX_REDUCE_SUM, sum}, {TRIAX_REDUCE_AVG, avg}, {TRIAX_REDUCE_MAX, max}, {TRIAX_REDUCE_MIN, min}};
        for (const auto& [op, expected] : cases) {
          at::Tensor tensor = at::full({3, 2}, mine, at::dtype(dtype));
          comm.all_reduce(group, tensor, op);
          EXPECT_TRUE(tensor.to(at::kDouble).eq(expected).all().item<bool>())
              << where(shape, group, dtype) << ", op " << op << ": got " << tensor << ", expected " << expected;
        }
      }
    }
  }
}

TEST(MpiCommunicator, AllGatherConcatenatesInGroupOrder) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    MpiCommunicator& comm = communicator(shape);
    for (triax_group group : group_kinds(shape)) {
      const std::vector<int> members = comm.context().members(group);
      for (at::ScalarType dtype : kDtypes) {
        const int me = comm.context().world_rank();
        at::Tensor input = (at::arange(3, at::kDouble) + 10 * me).to(dtype);
        at::Tensor output = at::zeros({static_cast<int64_t>(members.size()) * 3}, at::dtype(dtype));
        comm.all_gather(group, output, input);
        std::vector<at::Tensor> parts;
        for (int m : members) parts.push_back(at::arange(3, at::kDouble) + 10 * m);
        EXPECT_TRUE(output.to(at::kDouble).equal(at::cat(parts))) << where(shape, group, dtype) << ": " << output;
      }
    }
  }
}

TEST(MpiCommunicator, AllGatherIntoItsOwnSliceOfTheOutput) {
  const MeshShape shape{world_size(), 1, 1};
  MpiCommunicator& comm = communicator(shape);
  const int me = comm.context().world_rank();
  at::Tensor output = at::full({world_size(), 4}, -1.0);
  output[me].fill_(me);
  comm.all_gather(TRIAX_GROUP_DP, output, output[me]);
  for (int r = 0; r < world_size(); ++r) EXPECT_TRUE(output[r].eq(r).all().item<bool>()) << output;
}

TEST(MpiCommunicator, ReduceScatterGivesEachRankItsSliceOfTheSum) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    MpiCommunicator& comm = communicator(shape);
    for (triax_group group : group_kinds(shape)) {
      const std::vector<int> members = comm.context().members(group);
      const int64_t n = static_cast<int64_t>(members.size());
      const int position = comm.rank(group);
      for (at::ScalarType dtype : kDtypes) {
        if (dtype == at::kByte) continue;  // sums beyond 255
        const int me = comm.context().world_rank();
        // Sums stay below 256: exact in bf16 too.
        at::Tensor input = (at::arange(n * 2, at::kDouble) + 10 * me).to(dtype);
        at::Tensor output = at::zeros({2}, at::dtype(dtype));
        comm.reduce_scatter(group, output, input, TRIAX_REDUCE_SUM);
        at::Tensor expected = at::zeros({2}, at::kDouble);
        for (int m : members) expected += at::arange(position * 2, position * 2 + 2, at::kDouble) + 10 * m;
        EXPECT_TRUE(output.to(at::kDouble).equal(expected)) << where(shape, group, dtype) << ": " << output;
      }
    }
  }
}

// The host table's started collectives (ABI 1.6), as the SDK's overlapped layers use them: two in
// flight at once, finished in order with the blocking operations' results; a table of an older
// host (no start_*) gives the same results through the blocking ones; a finish without an
// operation is an error naming it.
TEST(MpiCommunicator, StartedCollectivesThroughTheHostTableFinishLikeBlockingOnes) {
  const MeshShape shape{world_size(), 1, 1};
  MpiCommunicator& comm = communicator(shape);
  HostServices services(comm);
  triax_host older = *services.c_host();
  older.struct_size = offsetof(triax_host, start_all_reduce);
  const int me = comm.context().world_rank();
  const int64_t n = world_size();
  for (const triax_host* table : {services.c_host(), static_cast<const triax_host*>(&older)}) {
    const Host host(table);
    const at::Tensor input = at::arange(n * 2, at::kFloat) + 10 * me;
    at::Tensor gathered = at::zeros({n * n * 2}), scattered = at::zeros({2}), summed = input.clone();
    PendingCollective gather = host.start_all_gather(TRIAX_GROUP_DP, gathered, input);
    PendingCollective scatter = host.start_reduce_scatter(TRIAX_GROUP_DP, scattered, input, TRIAX_REDUCE_SUM);
    PendingCollective reduce = host.start_all_reduce(TRIAX_GROUP_DP, summed, TRIAX_REDUCE_SUM);
    gather.wait();
    scatter.wait();
    reduce.wait();
    at::Tensor expected_gather = at::zeros({n * n * 2}), expected_scatter = at::zeros({2});
    at::Tensor expected_sum = at::zeros({n * 2});
    for (int r = 0; r < n; ++r) {
      expected_gather.narrow(0, r * n * 2, n * 2).copy_(at::arange(n * 2, at::kFloat) + 10 * r);
      expected_scatter += at::arange(me * 2, me * 2 + 2, at::kFloat) + 10 * r;
      expected_sum += at::arange(n * 2, at::kFloat) + 10 * r;
    }
    const std::string which = table == &older ? "older host: " : "ABI 1.6 host: ";
    EXPECT_TRUE(gathered.equal(expected_gather)) << which << gathered;
    EXPECT_TRUE(scattered.equal(expected_scatter)) << which << scattered;
    EXPECT_TRUE(summed.equal(expected_sum)) << which << summed;
  }
  triax_error error{};
  EXPECT_NE(services.c_host()->finish(services.c_host()->self, nullptr, &error), TRIAX_OK);
  EXPECT_NE(std::string(error.message).find("finish: no pending operation"), std::string::npos) << error.message;
}

// Rank p of a group of n sends (p + j) % 3 rows of two values to rank j: some pairs exchange no
// rows at all. Each row names its sender, its receiver and its index.
int64_t rows_between(int64_t sender, int64_t receiver) { return (sender + receiver) % 3; }
double row_value(int sender_world, int64_t receiver, int64_t row) { return 100 * sender_world + 10 * receiver + row; }

TEST(MpiCommunicator, AllToAllWithVariableSplitsIncludingEmptyOnes) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    MpiCommunicator& comm = communicator(shape);
    for (triax_group group : group_kinds(shape)) {
      const std::vector<int> members = comm.context().members(group);
      const auto n = static_cast<int64_t>(members.size());
      const int64_t me = comm.rank(group);
      std::vector<int64_t> send, receive;
      std::vector<at::Tensor> outgoing, expected;
      for (int64_t j = 0; j < n; ++j) {
        send.push_back(rows_between(me, j));
        receive.push_back(rows_between(j, me));
        for (int64_t row = 0; row < send.back(); ++row)
          outgoing.push_back(at::full({1, 2}, row_value(members[static_cast<size_t>(me)], j, row), at::kDouble));
        for (int64_t row = 0; row < receive.back(); ++row)
          expected.push_back(at::full({1, 2}, row_value(members[static_cast<size_t>(j)], me, row), at::kDouble));
      }
      auto rows = [](const std::vector<at::Tensor>& parts) {
        return parts.empty() ? at::zeros({0, 2}, at::kDouble) : at::cat(parts);
      };
      for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kLong}) {
        at::Tensor output = at::full({rows(expected).size(0), 2}, -1.0, at::dtype(dtype));
        comm.all_to_all_v(group, output, rows(outgoing).to(dtype), receive, send);
        EXPECT_TRUE(output.to(at::kDouble).equal(rows(expected))) << where(shape, group, dtype) << ": " << output;
      }
    }
  }
  MpiCommunicator& comm = communicator({world_size(), 1, 1});
  const std::vector<int64_t> ones(static_cast<size_t>(world_size()), 1);
  auto error_of = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string short_splits = error_of([&] {
    comm.all_to_all_v(TRIAX_GROUP_DP, at::zeros({world_size(), 2}), at::zeros({world_size(), 2}), ones, {1});
  });
  EXPECT_NE(short_splits.find("input splits have 1 entries for a group of"), std::string::npos) << short_splits;
  const std::string wrong_rows = error_of([&] {
    comm.all_to_all_v(TRIAX_GROUP_DP, at::zeros({world_size(), 2}), at::zeros({world_size() + 1, 2}), ones, ones);
  });
  EXPECT_NE(wrong_rows.find("input splits add up to"), std::string::npos) << wrong_rows;
}

TEST(MpiCommunicator, BroadcastCopiesTheRootsTensor) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    MpiCommunicator& comm = communicator(shape);
    for (triax_group group : group_kinds(shape)) {
      const std::vector<int> members = comm.context().members(group);
      const int root = static_cast<int>(members.size()) - 1;
      for (at::ScalarType dtype : kDtypes) {
        at::Tensor tensor = at::full({5}, value_of(comm.context().world_rank()), at::dtype(dtype));
        comm.broadcast(group, tensor, root);
        EXPECT_TRUE(tensor.to(at::kDouble).eq(value_of(members[root])).all().item<bool>())
            << where(shape, group, dtype) << ": " << tensor;
      }
    }
  }
}

TEST(MpiCommunicator, AllToAllExchangesEqualSplits) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    MpiCommunicator& comm = communicator(shape);
    for (triax_group group : group_kinds(shape)) {
      const std::vector<int> members = comm.context().members(group);
      const int64_t n = static_cast<int64_t>(members.size());
      const int position = comm.rank(group);
      const int me = comm.context().world_rank();
      at::Tensor input = at::arange(n * 2, at::kLong) + 100 * me;
      at::Tensor output = at::zeros({n * 2}, at::kLong);
      comm.all_to_all(group, output, input);
      std::vector<at::Tensor> parts;
      for (int m : members) parts.push_back(at::arange(position * 2, position * 2 + 2, at::kLong) + 100 * m);
      EXPECT_TRUE(output.equal(at::cat(parts))) << where(shape, group) << ": " << output;
    }
  }
}

TEST(MpiCommunicator, BarrierOverEveryGroupReturns) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    MpiCommunicator& comm = communicator(shape);
    for (triax_group group : group_kinds(shape)) comm.barrier(group);
  }
}

TEST(MpiCommunicator, NonContiguousTensorsAreWrittenBackInPlace) {
  const MeshShape shape{world_size(), 1, 1};
  MpiCommunicator& comm = communicator(shape);
  const double mine = value_of(comm.context().world_rank());
  double sum = 0;
  for (int r = 0; r < world_size(); ++r) sum += value_of(r);
  at::Tensor base = at::full({4, 6}, mine);
  at::Tensor strided = base.t().narrow(0, 1, 3);  // columns 1..3 of every row: not contiguous
  ASSERT_FALSE(strided.is_contiguous());
  comm.all_reduce(TRIAX_GROUP_WORLD, strided, TRIAX_REDUCE_SUM);
  EXPECT_TRUE(base.narrow(1, 1, 3).eq(sum).all().item<bool>()) << base;
  EXPECT_TRUE(base.narrow(1, 0, 1).eq(mine).all().item<bool>()) << "untouched column changed: " << base;
  EXPECT_TRUE(base.narrow(1, 4, 2).eq(mine).all().item<bool>()) << "untouched columns changed: " << base;

  at::Tensor gathered = at::zeros({3, world_size()});
  at::Tensor input = at::full({3}, mine);
  comm.all_gather(TRIAX_GROUP_WORLD, gathered.t(), input);  // output non-contiguous
  for (int r = 0; r < world_size(); ++r) EXPECT_TRUE(gathered.t()[r].eq(value_of(r)).all().item<bool>()) << gathered;
}

TEST(MpiCommunicator, PointToPointBetweenPipelineNeighbours) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    if (shape.pp < 2) continue;
    MpiCommunicator& comm = communicator(shape);
    const ParallelContext& context = comm.context();
    const int stage = comm.rank(TRIAX_GROUP_PP);
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
      // Activations forward: each stage sends its world rank to the next one.
      if (!context.is_first_pipeline_stage()) {
        at::Tensor received = at::zeros({2, 3}, at::dtype(dtype));
        comm.recv(TRIAX_GROUP_PP, received, stage - 1);
        EXPECT_TRUE(received.to(at::kDouble).eq(value_of(context.previous_pipeline_rank())).all().item<bool>())
            << where(shape, TRIAX_GROUP_PP, dtype) << ": " << received;
      }
      if (!context.is_last_pipeline_stage())
        comm.send(TRIAX_GROUP_PP, at::full({2, 3}, value_of(context.world_rank()), at::dtype(dtype)), stage + 1);
      // Gradients backward.
      if (!context.is_last_pipeline_stage()) {
        at::Tensor received = at::zeros({4}, at::dtype(dtype));
        comm.recv(TRIAX_GROUP_PP, received, stage + 1);
        EXPECT_TRUE(received.to(at::kDouble).eq(-value_of(context.next_pipeline_rank())).all().item<bool>())
            << where(shape, TRIAX_GROUP_PP, dtype) << ": " << received;
      }
      if (!context.is_first_pipeline_stage())
        comm.send(TRIAX_GROUP_PP, at::full({4}, -value_of(context.world_rank()), at::dtype(dtype)), stage - 1);
    }
  }
}

// Sends return at once (triax_engine_context.sends_buffered): both neighbours send twice before
// either receives, overwriting the tensor they sent in between, and each receives what the tensor
// held when it was sent, in the order sent.
TEST(MpiCommunicator, SendsReturnAtOnceFromACopyOfTheirTensor) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    if (shape.pp != 2) continue;
    MpiCommunicator& comm = communicator(shape);
    EXPECT_TRUE(comm.buffers_sends());
    const int stage = comm.rank(TRIAX_GROUP_PP), peer = 1 - stage;
    const int me = comm.context().world_rank(), other = comm.context().members(TRIAX_GROUP_PP)[peer];
    at::Tensor sent = at::full({256, 1024}, value_of(me));  // 1 MiB: past the eager sizes of MPI transports
    comm.send(TRIAX_GROUP_PP, sent, peer);
    sent.fill_(-value_of(me));
    comm.send(TRIAX_GROUP_PP, sent, peer);
    sent.fill_(0);
    at::Tensor first = at::empty({256, 1024}), second = at::empty({256, 1024});
    comm.recv(TRIAX_GROUP_PP, first, peer);
    comm.recv(TRIAX_GROUP_PP, second, peer);
    EXPECT_TRUE(first.eq(value_of(other)).all().item<bool>()) << where(shape, TRIAX_GROUP_PP);
    EXPECT_TRUE(second.eq(-value_of(other)).all().item<bool>()) << where(shape, TRIAX_GROUP_PP);
  }
}

// The message of the Error `body` throws (empty when it throws none).
template <typename Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One ring step per round over every group kind (ring attention's pattern): each rank sends to
// the next rank of its group and receives from the previous one, through the host table.
TEST(MpiCommunicator, SendRecvPassesTensorsAroundTheRing) {
  for (const MeshShape& shape : meshes_of_this_world()) {
    MpiCommunicator& comm = communicator(shape);
    HostServices services(comm);
    const Host host(services.c_host());
    for (triax_group group : group_kinds(shape)) {
      const std::vector<int> members = comm.context().members(group);
      const int n = static_cast<int>(members.size());
      if (n < 2) continue;
      const int me = comm.rank(group), next = (me + 1) % n, previous = (me + n - 1) % n;
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
        at::Tensor held = at::full({2, 3}, value_of(comm.context().world_rank()), at::dtype(dtype));
        for (int round = 1; round < n; ++round) {  // after round k: the tensor of the k-th previous rank
          at::Tensor received = at::zeros({2, 3}, at::dtype(dtype));
          triax_pending* pending = nullptr;
          triax_error error{};
          ASSERT_EQ(services.c_host()->start_send_recv(services.c_host()->self, group, borrow_handle(held), next,
                                                       borrow_handle(received), previous, &pending, &error),
                    TRIAX_OK)
              << error.message;
          ASSERT_EQ(services.c_host()->finish(services.c_host()->self, pending, &error), TRIAX_OK) << error.message;
          const int source = members[static_cast<size_t>((me + n - round) % n)];
          EXPECT_TRUE(received.to(at::kDouble).eq(value_of(source)).all().item<bool>())
              << where(shape, group, dtype) << ", round " << round << ": " << received;
          held = received;
        }
      }
    }
  }
  const MeshShape world{world_size(), 1, 1};
  EXPECT_NE(error_of([&] {
              communicator(world).start_send_recv(TRIAX_GROUP_DP, at::zeros({2}), communicator(world).rank(TRIAX_GROUP_DP),
                                                  at::zeros({2}), 0);
            }).find("send_recv: peer"),
            std::string::npos);
}

TEST(MpiCommunicator, LocalMistakesAreClearErrorsWithoutCommunicating) {
  const MeshShape shape{world_size(), 1, 1};
  MpiCommunicator& comm = communicator(shape);
  const int n = world_size();
  EXPECT_NE(error_of([&] {
              comm.all_gather(TRIAX_GROUP_DP, at::zeros({n * 3 + 1}), at::zeros({3}));
            }).find("output (" + std::to_string(n) + " x the input's 3) must hold " + std::to_string(n * 3)),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              comm.reduce_scatter(TRIAX_GROUP_DP, at::zeros({2}), at::zeros({3}), TRIAX_REDUCE_SUM);
            }).find("reduce_scatter: the input"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              comm.all_gather(TRIAX_GROUP_DP, at::zeros({n * 3}), at::zeros({3}, at::kLong));
            }).find("output is Float, input Long"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              comm.all_to_all(TRIAX_GROUP_DP, at::zeros({n * 2 + 1}), at::zeros({n * 2 + 1}));
            }).find("do not split evenly"),
            std::string::npos);
  const std::string bad_peer = error_of([&] { comm.send(TRIAX_GROUP_DP, at::zeros({1}), n); });
  EXPECT_NE(bad_peer.find("peer " + std::to_string(n) + " is not another rank of the dp group"), std::string::npos)
      << bad_peer;
  const std::string self_peer = error_of([&] { comm.recv(TRIAX_GROUP_DP, at::zeros({1}), comm.rank(TRIAX_GROUP_DP)); });
  EXPECT_NE(self_peer.find("is not another rank"), std::string::npos) << self_peer;
  EXPECT_NE(error_of([&] { comm.broadcast(TRIAX_GROUP_DP, at::zeros({1}), -1); }).find("root -1"), std::string::npos);
  const std::string dtype =
      error_of([&] { comm.all_reduce(TRIAX_GROUP_DP, at::zeros({2}, at::kComplexFloat), TRIAX_REDUCE_SUM); });
  EXPECT_NE(dtype.find("does not handle ComplexFloat"), std::string::npos) << dtype;
  // None of these touched MPI: the communicator still works.
  at::Tensor ones = at::ones({2});
  comm.all_reduce(TRIAX_GROUP_DP, ones, TRIAX_REDUCE_SUM);
  EXPECT_TRUE(ones.eq(n).all().item<bool>());
}

TEST(MpiCommunicator, ReceivingFewerElementsThanExpectedNamesBothSizes) {
  if (world_size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  // A communicator of its own: the receiver's fails.
  CommunicatorOptions options;
  options.timeout_seconds = 30;
  MpiCommunicator comm(MeshShape{1, 2, 1}, options);
  if (comm.context().world_rank() == 0) {
    comm.send(TRIAX_GROUP_PP, at::ones({3}), 1);
  } else {
    const std::string message = error_of([&] { comm.recv(TRIAX_GROUP_PP, at::zeros({5}), 0); });
    EXPECT_NE(message.find("received 3 elements, expected 5"), std::string::npos) << message;
  }
}

TEST(MpiCommunicator, RefusesAMeshOfAnotherWorldSize) {
  const std::string message = error_of([] { MpiCommunicator comm(MeshShape{world_size() + 1, 1, 1}); });
  EXPECT_NE(message.find("but mpirun started " + std::to_string(world_size()) + " processes"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace triax
