// Gradients handed over in bf16 (one micro-batch a step, GradientHandoff::kAsComputed) through the
// data-parallel reduction on real ranks: both the all-reduce and the ZeRO reduce-scatter reduce an
// fp32 copy of each, so the means (kept in fp32), the global norm and the clipping coefficient are
// those of fp32 copies handed over, bit for bit.
#include <ATen/ATen.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "multi_rank_environment.hpp"
#include "test_plugin_registry.hpp"
#include "training_test_support.hpp"
#include "triax/parallel/data_parallel_gradients.hpp"

namespace triax {
namespace {

using testing::communicator;
using testing::world_size;

const std::vector<std::vector<int64_t>> kBf16Shapes = {{7}, {3, 5}, {1}, {13}, {4, 4}, {2}};

std::vector<NamedParameter> bf16_parameters() {
  std::vector<NamedParameter> params;
  for (size_t k = 0; k < kBf16Shapes.size(); ++k) {
    at::Tensor t = at::zeros(kBf16Shapes[k], at::kBFloat16);
    params.push_back({"p" + std::to_string(k), t, ParameterSpec::replicated(t, 0)});
  }
  return params;
}

// Distinct per rank and parameter, exactly representable in bf16.
std::vector<at::Tensor> bf16_gradients(int rank) {
  std::vector<at::Tensor> grads;
  for (size_t k = 0; k < kBf16Shapes.size(); ++k) {
    at::Tensor g = at::arange(at::empty(kBf16Shapes[k]).numel(), at::kFloat).mul(0.29 * (rank + 1)).add(k).sin();
    grads.push_back(g.to(at::kBFloat16).view(kBf16Shapes[k]));
  }
  return grads;
}

// Reduces this rank's bf16 gradients and, beside them, their fp32 copies, with one sharding and
// bucket cap; everything the optimizer gets must be the same fp32 bits.
void check_bf16_reduction(triax_gradient_sharding sharding, int64_t cap) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const int rank = comm.rank(TRIAX_GROUP_DP);
  auto params = bf16_parameters();
  const std::vector<bool> counted(params.size(), true);
  DataParallelGradients low(params, sharding, cap, {rank, dp}, counted);
  DataParallelGradients full(params, sharding, cap, {rank, dp}, counted);
  const std::vector<at::Tensor> grads = bf16_gradients(rank);
  const at::Tensor before = grads[0].clone();
  std::vector<at::Tensor> copies;
  for (const at::Tensor& g : grads) copies.push_back(g.to(at::kFloat));
  low.reduce_over_data_parallel(grads, comm);
  full.reduce_over_data_parallel(copies, comm);
  for (size_t k = 0; k < params.size(); ++k) {
    EXPECT_EQ(low.for_optimizer()[k].scalar_type(), at::kFloat) << "parameter " << k << ", cap " << cap;
    EXPECT_TRUE(at::equal(low.for_optimizer()[k], full.for_optimizer()[k]))
        << "parameter " << k << ", rank " << rank << ", cap " << cap;
  }
  EXPECT_TRUE(at::equal(grads[0], before));  // the bf16 gradient is read, never rounded into
  const GlobalNorm a = low.norm(0.25, comm), b = full.norm(0.25, comm);
  EXPECT_TRUE(at::equal(a.norm, b.norm));
  EXPECT_TRUE(at::equal(a.coefficient, b.coefficient));
}

const std::vector<int64_t> kCaps = {1, 64, int64_t{1} << 20};  // bytes: a bucket per parameter, some, one

TEST(DataParallelGradients, ReduceScatterOfBf16GradientsGivesTheShardsOfTheirFp32Copies) {
  for (int64_t cap : kCaps) check_bf16_reduction(TRIAX_GRADIENTS_DP_SHARDED, cap);
}

TEST(DataParallelGradients, AllReduceOfBf16GradientsGivesTheFp32MeanOfTheirCopies) {
  for (int64_t cap : kCaps) check_bf16_reduction(TRIAX_GRADIENTS_WHOLE, cap);
}

// Whole runs on the dp ranks: the reductions read the same fp32 values either way.
TEST(DataParallelTraining, Bf16GradientsHandedOverAsComputedGiveTheFp32CopiesRun) {
  MpiCommunicator& comm = communicator({world_size(), 1, 1});
  testing::expect_bf16_handoffs_agree(6, 2, comm, [](const std::string& name) {
    return std::filesystem::temp_directory_path() / ("triax_dp_" + name + "_" + std::to_string(::getppid()));
  });
}

}  // namespace
}  // namespace triax
