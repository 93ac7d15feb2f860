// The nccl backend's asynchronous all_reduce, all_gather and reduce_scatter at world size 1 (one
// GPU): they finish with the blocking operations' results while other GPU work runs, a
// non-contiguous result receives its values, and test() finishes a completed operation; the
// column-parallel layer's overlapped path (tp_linear_async_communication) runs through the host
// table on them and equals the plain one. Skipped without a GPU; timing the overlap needs
// several GPUs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "comm/nccl_communicator.hpp"
#include "triax/core/comm/launch_environment.hpp"
#include "triax/core/comm/parallel_context.hpp"
#include "triax/layers/linear.hpp"

namespace triax {
namespace {

std::unique_ptr<Communicator> single_gpu_communicator() {
  LaunchEnvironment launch;
  launch.launcher = LaunchEnvironment::Launcher::torchrun;
  launch.master_address = "127.0.0.1";
  launch.master_port = 20000 + static_cast<int>(getpid() % 20000);  // the heartbeat takes the next port
  CommunicatorOptions options;
  options.timeout_seconds = 60;
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

}  // namespace
}  // namespace triax
