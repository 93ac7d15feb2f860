// What a model holds per rank before it is built (triax/device/model_memory.hpp): its share of
// the parameters and gradients in the model's dtype, and of AdamW's fp32 state, each split as the
// topology and the ZeRO stage split them; and the free memory of the CPU.
#include "triax/device/model_memory.hpp"

#include <gtest/gtest.h>

namespace triax {
namespace {

TrainConfig adamw_run(const std::string& dtype) {
  TrainConfig config;
  config.model.dtype = dtype;
  config.optimizer.plugin = "adamw";
  return config;
}

TEST(ModelMemory, ParametersGradientsAndAdamWStateOnOneRank) {
  // bf16: 2 + 2 bytes, then two fp32 moments and an fp32 master (12 bytes).
  EXPECT_DOUBLE_EQ(model_bytes_per_rank(adamw_run("bfloat16"), 1e9), 16e9);
  // fp32 weights are their own masters: 4 + 4 + 8.
  EXPECT_DOUBLE_EQ(model_bytes_per_rank(adamw_run("float32"), 1e9), 16e9);
  TrainConfig other = adamw_run("bfloat16");
  other.optimizer.plugin = "some_optimizer";  // a state it does not know is not counted
  EXPECT_DOUBLE_EQ(model_bytes_per_rank(other, 1e9), 4e9);
}

TEST(ModelMemory, TheTopologyAndZeroSplitTheShare) {
  TrainConfig config = adamw_run("bfloat16");
  config.parallelism.tp = 2;
  config.parallelism.pp = 2;
  config.parallelism.dp = 4;
  EXPECT_DOUBLE_EQ(model_bytes_per_rank(config, 4e9), 16e9);  // 1e9 per rank, replicated over dp
  config.optimizer.zero_stage = 1;                            // the state's 12 bytes over dp too
  EXPECT_DOUBLE_EQ(model_bytes_per_rank(config, 4e9), 1e9 * 4.0 + 0.25e9 * 12.0);
  config.optimizer.zero_stage = 3;  // everything over dp
  EXPECT_DOUBLE_EQ(model_bytes_per_rank(config, 4e9), 0.25e9 * 16.0);
  config.optimizer.zero_stage = 0;
  config.parallelism.expert_parallel_size = 2;  // counted as if ep split every parameter: a lower bound
  EXPECT_DOUBLE_EQ(model_bytes_per_rank(config, 4e9), 8e9);
}

TEST(ModelMemory, TheCpuSaysWhatIsAvailable) {
  const std::optional<double> free = free_device_bytes(c10::Device(c10::kCPU));
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(*free, 0.0);
}

}  // namespace
}  // namespace triax
