// Gradients handed over in bf16 (one micro-batch a step, GradientHandoff::kAsComputed) through the
// data-parallel reduction on real ranks: the ZeRO reduce-scatter reads an fp32 copy of each, so
// its shards, the global norm and the clipping coefficient are those of fp32 copies handed over,
// bit for bit; the all-reduce in place, which would round the mean to bf16, refuses them.
#include <ATen/ATen.h>

#include <string>

#include "multi_rank_environment.hpp"
#include "triax/core/gradients/data_parallel_gradients.hpp"
#include "triax/error.hpp"

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

TEST(DataParallelGradients, ReduceScatterOfBf16GradientsGivesTheShardsOfTheirFp32Copies) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const int rank = comm.rank(TRIAX_GROUP_DP);
  auto params = bf16_parameters();
  const std::vector<bool> counted(params.size(), true);
  DataParallelGradients low(params, TRIAX_GRADIENTS_DP_SHARDED, 64, {rank, dp}, counted);
  DataParallelGradients full(params, TRIAX_GRADIENTS_DP_SHARDED, 64, {rank, dp}, counted);
  const std::vector<at::Tensor> grads = bf16_gradients(rank);
  std::vector<at::Tensor> copies;
  for (const at::Tensor& g : grads) copies.push_back(g.to(at::kFloat));
  low.reduce_over_data_parallel(grads, comm);
  full.reduce_over_data_parallel(copies, comm);
  for (size_t k = 0; k < params.size(); ++k) {
    EXPECT_EQ(low.for_optimizer()[k].scalar_type(), at::kFloat) << "parameter " << k;
    EXPECT_TRUE(at::equal(low.for_optimizer()[k], full.for_optimizer()[k])) << "parameter " << k << ", rank " << rank;
  }
  const GlobalNorm a = low.norm(0.25, comm), b = full.norm(0.25, comm);
  EXPECT_TRUE(at::equal(a.norm, b.norm));
  EXPECT_TRUE(at::equal(a.coefficient, b.coefficient));
}

TEST(DataParallelGradients, AllReduceInPlaceRefusesBf16Gradients) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  const int rank = comm.rank(TRIAX_GROUP_DP);
  auto params = bf16_parameters();
  DataParallelGradients reduction(params, TRIAX_GRADIENTS_WHOLE, 64, {rank, dp},
                                  std::vector<bool>(params.size(), true));
  try {
    reduction.reduce_over_data_parallel(bf16_gradients(rank), comm);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'p0' is BFloat16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace triax
