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
#include "triax/core/gradients/data_parallel_gradients.hpp"

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

// Whole bf16 runs on dp ranks with one micro-batch a step, with and without ZeRO:
// accumulate_grad_in_fp32 true hands the bf16 gradients over as computed, false hands fp32 copies
// of them over; both reduce the same fp32 values, so the runs agree bit for bit.
TEST(DataParallelTraining, Bf16GradientsHandedOverAsComputedGiveTheFp32CopiesRun) {
  const int dp = world_size();
  MpiCommunicator& comm = communicator({dp, 1, 1});
  for (const std::string zero_stage : {"0", "1"}) {
    std::vector<TrainSummary> summaries;
    std::vector<std::vector<at::Tensor>> finals;
    for (const std::string fp32 : {"true", "false"}) {
      // One folder for all ranks of a run (its final checkpoint is one folder).
      const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                        ("triax_dp_handoff_" + std::to_string(::getppid()) + "_" + zero_stage + fp32);
      std::string yaml = testing::tiny_config(dir, 6, 2, 1, "bfloat16");
      const auto replace = [&](const std::string& from, const std::string& to) {
        yaml.replace(yaml.find(from), from.size(), to);
      };
      replace("dp: 1,", "dp: " + std::to_string(dp) + ",");
      replace("accumulate_grad_in_fp32: true", "accumulate_grad_in_fp32: " + fp32);
      replace("zero_stage: 0", "zero_stage: " + zero_stage);
      replace("clip_grad: 1.0", "clip_grad: 0.05");
      Trainer trainer(parse_train_config(YAML::Load(yaml), "dp.yaml"), testing::test_plugin_registry(), comm);
      summaries.push_back(trainer.train());
      finals.emplace_back();
      for (const NamedParameter& p : trainer.parameters()) finals.back().push_back(p.tensor.detach().clone());
    }
    EXPECT_EQ(summaries[0].losses, summaries[1].losses) << "zero_stage " << zero_stage;
    EXPECT_EQ(summaries[0].grad_norms, summaries[1].grad_norms) << "zero_stage " << zero_stage;
    for (size_t k = 0; k < finals[0].size(); ++k)
      EXPECT_TRUE(at::equal(finals[0][k], finals[1][k])) << "zero_stage " << zero_stage << ", parameter " << k;
  }
}

}  // namespace
}  // namespace triax
