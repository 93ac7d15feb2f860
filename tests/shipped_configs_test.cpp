// Every config shipped in configs/ loads, and the benchmark configs match the benchmark setup.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "config_test_support.hpp"

namespace triax {
namespace {

using namespace config_test;

std::vector<std::string> yaml_files_in(const std::string& folder) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Every config shipped in configs/ loads (the model plugin reads model_config later).
TEST(ShippedConfigs, EveryConfigLoads) {
  std::vector<std::string> files = yaml_files_in(TRIAX_CONFIGS_DIR);
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) EXPECT_NO_THROW(load_train_config(file)) << file;
}

// The benchmark configs: what tools/device/bench.sh and docs/performance.md rely on. The Llama
// family (smollm-*.yaml) has the shapes of SmolLM (smollm-3b: SmolLM3-3B's, at seq 4096), the
// Mamba family (mamba-*.yaml) those of state-spaces' Mamba checkpoints, the Qwen3 family
// (qwen3-*.yaml) those of Qwen3-0.6B and -1.7B, mamba2-780m a Mamba-2 of the 780m checkpoint's
// width and depth with state 128 (smollm-780m: a SmolLM-shaped Llama of its size, to set beside
// it), nemotron-h-small a small Nemotron-H hybrid (mostly Mamba-2 layers, a few attention and MLP
// layers); moe-1b is a Mixtral-layout model with SmolLM's vocabulary.
TEST(ShippedConfigs, BenchmarkConfigsMatchTheBenchmarkSetup) {
  std::vector<std::string> files = yaml_files_in(std::string(TRIAX_CONFIGS_DIR) + "/bench");
  // smollm-135m, -360m, -780m, -1.7b, -3b; mamba-130m, -370m, -1.4b; mamba2-780m; moe-1b;
  // nemotron-h-small; qwen3-0.6b, -1.7b
  ASSERT_EQ(files.size(), 13u);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    TrainConfig c = load_train_config(file);
    const std::string name = std::filesystem::path(file).filename().string();
    const bool mamba = name.rfind("mamba-", 0) == 0;
    const bool mamba2 = name.rfind("mamba2-", 0) == 0;
    const bool moe = name.rfind("moe-", 0) == 0;
    const bool nemotron_h = name.rfind("nemotron-h-", 0) == 0;
    const bool qwen3 = name.rfind("qwen3-", 0) == 0;
    const bool smollm3 = name == "smollm-3b.yaml";
    EXPECT_EQ(c.model.plugin, mamba        ? "mamba"
                              : mamba2     ? "mamba2"
                              : moe        ? "moe"
                              : nemotron_h ? "nemotron_h"
                              : qwen3      ? "qwen3"
                                           : "llama");
    EXPECT_EQ(c.general.device, "cuda");
    EXPECT_EQ(c.parallelism.comm_backend, "nccl");
    EXPECT_EQ(c.parallelism.dp * c.parallelism.tp * c.parallelism.pp, 1);  // one GPU
    EXPECT_EQ(c.model.dtype, "bfloat16");
    const int vocab = mamba || mamba2 || nemotron_h ? 50280 : smollm3 ? 128256 : qwen3 ? 151936 : 49152;
    EXPECT_EQ(c.model.model_config["vocab_size"].as<int>(), vocab);
    EXPECT_TRUE(c.model.model_config["tie_word_embeddings"].as<bool>());
    if (mamba) {
      EXPECT_EQ(c.model.model_config["ssm_cfg"]["d_state"].as<int>(), 16);
      EXPECT_EQ(c.model.model_config["ssm_cfg"]["d_conv"].as<int>(), 4);
      EXPECT_EQ(c.model.model_config["ssm_cfg"]["expand"].as<int>(), 2);
    }
    if (mamba2) {
      EXPECT_EQ(c.model.model_config["state_size"].as<int>(), 128);
      EXPECT_EQ(c.model.model_config["head_dim"].as<int>(), 64);
    }
    if (nemotron_h) {  // mostly Mamba-2 layers, a few attention and MLP layers
      const std::string pattern = c.model.model_config["hybrid_override_pattern"].as<std::string>();
      const auto count = [&](char letter) { return std::count(pattern.begin(), pattern.end(), letter); };
      EXPECT_GT(count('M'), count('*') + count('-'));
      EXPECT_GT(count('*'), 0);
      EXPECT_GT(count('-'), 0);
    }
    EXPECT_EQ(c.tokens.sequence_length, smollm3 ? 4096 : 2048);
    EXPECT_EQ(c.tokens.batch_accumulation_per_replica, 1);
    EXPECT_GE(c.tokens.train_steps, 20);  // warm-up steps are skipped, the median of the rest taken
    ASSERT_EQ(c.data_stages.size(), 1u);
    EXPECT_TRUE(c.data_stages[0].data.dataset.IsNull());   // synthetic tokens
    EXPECT_EQ(c.logging.iteration_step_info_interval, 1);  // one metrics line per step
    EXPECT_EQ(c.checkpoints.checkpoint_interval, 0);
    EXPECT_EQ(c.optimizer.plugin, "adamw");
    EXPECT_TRUE(c.optimizer.section["optimizer_factory"]["torch_adam_is_fused"].as<bool>());
    ASSERT_TRUE(c.optimizer.clip_grad.has_value());
    EXPECT_EQ(*c.optimizer.clip_grad, 1.0);
    const LrSchedulerConfig& lr = c.optimizer.learning_rate_scheduler;
    EXPECT_EQ(lr.min_decay_lr, lr.learning_rate) << "the peer's learning rate is constant";
  }
}

}  // namespace
}  // namespace triax
