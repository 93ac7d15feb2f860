// The nccl backend's asynchronous all_reduce, all_gather and reduce_scatter at world size 1 (one
// GPU): they finish with the blocking operations' results while other GPU work runs, a
// non-contiguous result receives its values, and test() finishes a completed operation; the
// column-parallel layer's overlapped path (tp_linear_async_communication) runs through the host
// table on them and equals the plain one. Every operation only orders the caller's stream: the
// host returns while the GPU is still busy, settle() waits, and names an operation that does not
// complete within the timeout. Skipped without a GPU; timing the overlap needs several GPUs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "nccl_communicator.hpp"
#include "triax/comm/launch_environment.hpp"
#include "triax/core/comm/parallel_context.hpp"
#include "triax/layers/linear.hpp"

namespace triax {
namespace {

using Clock = std::chrono::steady_clock;

// Used by the CUDA tests only.
[[maybe_unused]] double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<Communicator> single_gpu_communicator(double timeout_seconds = 60) {
  LaunchEnvironment launch;
  launch.launcher = LaunchEnvironment::Launcher::torchrun;
  launch.master_address = "127.0.0.1";
  launch.master_port = 20000 + static_cast<int>(getpid() % 20000);  // the heartbeat takes the next port
  CommunicatorOptions options;
  options.timeout_seconds = timeout_seconds;
  return make_nccl_communicator(MeshShape{}, options, launch);
}

TEST(NcclCommunicatorCuda, AsynchronousCollectivesFinishLikeBlockingOnes) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  std::unique_ptr<Communicator> comm = single_gpu_communicator();
  ASSERT_TRUE(comm->has_asynchronous_collectives());
  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);

  at::Tensor summed = at::arange(12, cuda).reshape({3, 4});
  const at::Tensor expected = summed.clone();
  std::unique_ptr<PendingOperation> reduce = comm->start_all_reduce(TRIAX_GROUP_DP, summed, TRIAX_REDUCE_SUM);
  at::Tensor busy = at::randn({2048, 2048}, cuda);
  for (int i = 0; i < 4; ++i) busy = at::matmul(busy, busy).tanh();  // work in flight meanwhile
  reduce->wait();
  reduce->wait();  // a second wait is a no-op
  EXPECT_TRUE(at::equal(summed, expected));

  // A transposed view: the operation works on a contiguous copy and writes the result back.
  at::Tensor base = at::arange(12, cuda).reshape({3, 4});
  at::Tensor view = base.t();
  ASSERT_FALSE(view.is_contiguous());
  std::unique_ptr<PendingOperation> averaged = comm->start_all_reduce(TRIAX_GROUP_DP, view, TRIAX_REDUCE_AVG);
  while (!averaged->test()) {
  }
  EXPECT_TRUE(at::equal(base, at::arange(12, cuda).reshape({3, 4})));
  EXPECT_TRUE(averaged->test());

  at::Tensor input = at::randn({16}, cuda), output = at::zeros({16}, cuda);
  comm->start_reduce_scatter(TRIAX_GROUP_DP, output, input, TRIAX_REDUCE_SUM)->wait();
  EXPECT_TRUE(at::equal(output, input));
  EXPECT_TRUE(busy.isfinite().all().item<bool>());

  at::Tensor gathered = at::zeros({16}, cuda);
  std::unique_ptr<PendingOperation> gather = comm->start_all_gather(TRIAX_GROUP_TP, gathered, input);
  gather->wait();
  EXPECT_TRUE(at::equal(gathered, input));
}

TEST(NcclCommunicatorCuda, OverlappedColumnParallelLinearEqualsThePlainOne) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  std::unique_ptr<Communicator> comm = single_gpu_communicator();
  HostServices services(*comm);
  for (TpMode mode : {TpMode::AllReduce, TpMode::ReduceScatter}) {
    for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const auto options = at::TensorOptions().device(at::kCUDA).dtype(dtype);
      const at::Tensor x = at::randn({2, 64, 96}, options), grad = at::randn({2, 64, 128}, options);
      const at::Tensor w = at::randn({128, 96}, options) / 10, b = at::randn({128}, options);
      std::vector<at::Tensor> outputs, input_grads, weight_grads;
      for (bool overlap : {false, true}) {
        TensorParallel tp;
        tp.host = Host(services.c_host());
        tp.mode = mode;
        tp.overlap_communication = overlap;
        ColumnParallelLinear layer({96, 128, true, at::Device(at::kCUDA), dtype}, tp);
        {
          at::NoGradGuard no_grad;
          layer.weight.copy_(w);
          layer.bias.copy_(b);
        }
        at::Tensor input = x.clone().requires_grad_(true);
        at::Tensor y = layer.forward(input);
        (y.to(at::kFloat) * grad.to(at::kFloat)).sum().backward();
        outputs.push_back(y.to(at::kFloat));
        input_grads.push_back(input.grad().to(at::kFloat));
        weight_grads.push_back(layer.weight.grad().to(at::kFloat));
      }
      const double tolerance = dtype == at::kFloat ? 1e-4 : 2e-2;
      const std::string what = std::string(mode == TpMode::AllReduce ? "ALL_REDUCE " : "REDUCE_SCATTER ") +
                               c10::toString(dtype);
      EXPECT_TRUE(at::allclose(outputs[1], outputs[0], tolerance, tolerance)) << what << " output";
      EXPECT_TRUE(at::allclose(input_grads[1], input_grads[0], tolerance, tolerance)) << what << " input gradient";
      EXPECT_TRUE(at::allclose(weight_grads[1], weight_grads[0], tolerance, tolerance)) << what << " weight gradient";
    }
  }
}

#ifdef TRIAX_WITH_CUDA
// Queues a kernel that keeps the GPU busy for about `seconds` (its spin is counted in clock
// cycles, measured here against the host's clock).
void keep_gpu_busy(double seconds) {
  static const double cycles_per_second = [] {
    constexpr int64_t kProbe = 200'000'000;
    at::cuda::sleep(kProbe / 10);  // loads the kernel
    c10::cuda::device_synchronize();
    const auto start = Clock::now();
    at::cuda::sleep(kProbe);
    c10::cuda::device_synchronize();
    return static_cast<double>(kProbe) / seconds_since(start);
  }();
  at::cuda::sleep(static_cast<int64_t>(seconds * cycles_per_second));
}

// A group's first collective creates its NCCL communicator, and a kernel's first launch loads
// it; both wait for the GPU, so they are done here, before the timed part.
void connect(Communicator& comm, triax_group group) {
  at::Tensor probe = at::ones({1024}, at::TensorOptions().device(at::kCUDA)), gathered = at::empty_like(probe);
  comm.all_reduce(group, probe, TRIAX_REDUCE_SUM);
  comm.all_gather(group, gathered, probe);
  gathered.add_(1);
  keep_gpu_busy(0);  // measures the clock
  comm.settle();
  c10::cuda::device_synchronize();
}

TEST(NcclCommunicatorCuda, OperationsOrderTheStreamWithoutBlockingTheHost) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  std::unique_ptr<Communicator> comm = single_gpu_communicator();
  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  at::Tensor input = at::zeros({1024}, cuda), gathered = at::zeros({1024}, cuda);
  connect(*comm, TRIAX_GROUP_WORLD);

  const auto start = Clock::now();
  keep_gpu_busy(1.0);
  input.fill_(3);  // written after the busy kernel
  comm->all_gather(TRIAX_GROUP_WORLD, gathered, input);
  comm->all_reduce(TRIAX_GROUP_WORLD, gathered, TRIAX_REDUCE_SUM);
  gathered.add_(1);  // on the caller's stream: after the collectives
  EXPECT_LT(seconds_since(start), 0.5) << "the collectives waited for the GPU on the host";
  comm->settle();
  EXPECT_GT(seconds_since(start), 0.8) << "settle() returned before the collectives completed";
  EXPECT_TRUE(at::equal(gathered.cpu(), at::full({1024}, 4.0f))) << "the stream did not wait for the collectives";

  // A barrier, unlike the others, returns to the host only once the GPU has got there.
  const auto barrier_start = Clock::now();
  keep_gpu_busy(1.0);
  comm->barrier(TRIAX_GROUP_WORLD);
  EXPECT_GT(seconds_since(barrier_start), 0.8) << "the barrier returned before the GPU reached it";
  EXPECT_FALSE(comm->failed());
}

TEST(NcclCommunicatorCuda, SettleNamesAnOperationThatDoesNotCompleteWithinTheTimeout) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  std::unique_ptr<Communicator> comm = single_gpu_communicator(/*timeout_seconds=*/2);
  comm->set_step(7);
  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  at::Tensor tensor = at::ones({16}, cuda);
  connect(*comm, TRIAX_GROUP_DP);
  // Busy for 3 s: settle() gives up at 2 s; ProcessGroupNCCL's own watchdog (twice the timeout)
  // never fires, since the collective completes at 3 s.
  keep_gpu_busy(3.0);
  comm->all_reduce(TRIAX_GROUP_DP, tensor, TRIAX_REDUCE_SUM);
  const auto start = Clock::now();
  std::string message;
  try {
    comm->settle();
  } catch (const CommunicationError& e) {
    message = e.what();
  }
  const double waited = seconds_since(start);
  c10::cuda::device_synchronize();
  EXPECT_NE(message.find("rank 0: step 7: all_reduce over the dp group [0] failed or got no answer within 2"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(still running)"), std::string::npos) << message;
  EXPECT_GE(waited, 1.9);
  EXPECT_LT(waited, 5.0);  // the heartbeat read included
  EXPECT_TRUE(comm->failed());
}
#endif

}  // namespace
}  // namespace triax
