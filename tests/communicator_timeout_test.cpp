// The no-hang guarantee of the mpi backend, at 2 ranks: a peer that stops (SIGSTOP: its heartbeat
// goes stale) or lags (alive, at an older step) makes the waiting rank fail within the timeout,
// naming the step, the operation, the group and the peer. The silent rank then resumes and makes
// the matching call, so that MPI itself stays consistent for the next test.
#include <ATen/ATen.h>
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "multi_rank_environment.hpp"

namespace triax {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kTimeout = 3;
constexpr double kSlack = 6;  // the heartbeat read, a loaded machine

// Communicators of their own: a failed one is destroyed without collective clean-up.
std::unique_ptr<MpiCommunicator> fresh_communicator() {
  CommunicatorOptions options;
  options.timeout_seconds = kTimeout;
  options.heartbeat_interval_seconds = 0.2;
  return std::make_unique<MpiCommunicator>(MeshShape{2, 1, 1}, options);
}

pid_t pid_of_rank_one() {
  int pids[2] = {0, 0};
  int mine = static_cast<int>(getpid());
  MPI_Allgather(&mine, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
  return pids[1];
}

template <typename Body>
std::pair<std::string, double> failure_of(Body&& body) {
  const auto start = Clock::now();
  try {
    body();
  } catch (const CommunicationError& e) {
    return {e.what(), std::chrono::duration<double>(Clock::now() - start).count()};
  }
  return {"", std::chrono::duration<double>(Clock::now() - start).count()};
}

TEST(MpiCommunicatorTimeout, AStoppedPeerIsNamedAsDeadOrHung) {
  TRIAX_REQUIRE_WORLD_SIZE(2);
  auto owned = fresh_communicator();
  MpiCommunicator& comm = *owned;
  const pid_t stopped = pid_of_rank_one();
  at::Tensor tensor = at::ones({4});
  if (testing::world_rank() == 1) {
    comm.set_step(6);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the heartbeat publishes step 6
    MPI_Barrier(MPI_COMM_WORLD);
    raise(SIGSTOP);                                             // rank 0 resumes us after its timeout
    comm.all_reduce(TRIAX_GROUP_DP, tensor, TRIAX_REDUCE_SUM);  // matches rank 0's abandoned one
    return;
  }
  comm.set_step(7);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto [message, seconds] = failure_of([&] { comm.all_reduce(TRIAX_GROUP_DP, tensor, TRIAX_REDUCE_SUM); });
  kill(stopped, SIGCONT);
  EXPECT_NE(message.find("rank 0: step 7: all_reduce over the dp group [0 1] got no answer for 3 s: rank 1 last seen"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("ago at step 6 (dead or hung)"), std::string::npos) << message;
  EXPECT_GE(seconds, kTimeout);
  EXPECT_LT(seconds, kTimeout + kSlack);
  // Once failed, it refuses further use instead of waiting again.
  EXPECT_NE(failure_of([&] { comm.barrier(TRIAX_GROUP_WORLD); }).first.find("failed earlier"), std::string::npos);
}

TEST(MpiCommunicatorTimeout, ALaggingPeerOfAPointToPointIsNamedWithItsStep) {
  TRIAX_REQUIRE_WORLD_SIZE(2);
  auto owned = fresh_communicator();
  MpiCommunicator& comm = *owned;
  at::Tensor tensor = at::ones({4});
  if (testing::world_rank() == 1) {
    comm.set_step(2);
    std::this_thread::sleep_for(std::chrono::duration<double>(kTimeout + 1.5));
    comm.send(TRIAX_GROUP_DP, tensor, 0);  // matches rank 0's abandoned receive
    return;
  }
  comm.set_step(3);
  const auto [message, seconds] = failure_of([&] { comm.recv(TRIAX_GROUP_DP, tensor, 1); });
  EXPECT_NE(message.find("step 3: recv from rank 1 (peer 1 of the dp group [0 1]) got no answer for 3 s: rank 1 is "
                         "alive but still at step 2"),
            std::string::npos)
      << message;
  EXPECT_GE(seconds, kTimeout);
  EXPECT_LT(seconds, kTimeout + kSlack);
}

}  // namespace
}  // namespace triax
