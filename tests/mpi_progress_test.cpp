// The mpi backend's progress thread (comm/src/mpi_progress_thread.hpp): a send posted by a rank
// that then computes without calling MPI reaches its receiver while the sender computes. Run with
// Open MPI's shared-memory single copy off (communication.cmake), where without the thread a large
// message moves only while its sender is inside MPI.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>

#include "multi_rank_environment.hpp"

namespace triax {
namespace {

using testing::communicator;
using testing::world_size;
using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST(MpiProgressThread, LargeSendArrivesWhileTheSenderComputes) {
  TRIAX_REQUIRE_WORLD_SIZE(2);
  constexpr double kComputeMs = 800;
  MpiCommunicator& comm = communicator(MeshShape{1, 2, 1});
  const int me = comm.rank(TRIAX_GROUP_PP);
  const int64_t elements = 1 << 20;  // 4 MiB of fp32: 128 of shared memory's fragments
  comm.barrier(TRIAX_GROUP_PP);
  const auto start = Clock::now();
  if (me == 0) {
    comm.send(TRIAX_GROUP_PP, at::arange(elements, at::kFloat), 1);
    // A pass: no MPI call until it ends.
    volatile double sink = 0;
    while (milliseconds_since(start) < kComputeMs) sink = sink + 1.0;
  } else {
    at::Tensor received = at::zeros({elements}, at::kFloat);
    comm.recv(TRIAX_GROUP_PP, received, 0);
    const double arrived_ms = milliseconds_since(start);
    std::fprintf(stderr, "[rank 1] 4 MiB received after %.1f ms; the sender computes for %.0f ms\n", arrived_ms,
                 kComputeMs);
    EXPECT_TRUE(received.equal(at::arange(elements, at::kFloat)));
    // Without progress it arrives only once the sender calls MPI again, after its pass.
    EXPECT_LT(arrived_ms, kComputeMs / 2);
  }
  comm.barrier(TRIAX_GROUP_PP);
}

}  // namespace
}  // namespace triax
