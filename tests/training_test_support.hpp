// Shared by the training tests: optimizer instances through the plugins' C ABI, and whole
// training runs in the test process of a tiny Llama config on the synthetic stream.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "test_plugin_registry.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/config/train_config.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/trainer.hpp"
#include "triax/tensor_handle.hpp"

namespace triax::testing {

namespace fs = std::filesystem;

// An optimizer over `params` (weight decay 0.1 on the first, 0 on the others) on one dp rank,
// through `vtable`, which must outlive it.
inline std::unique_ptr<OptimizerInstance> make_optimizer(const triax_optimizer_vtable& vtable, const std::string& name,
                                                         const std::vector<at::Tensor>& params, const std::string& yaml) {
  triax_optimizer_context context{};
  context.struct_size = sizeof(context);
  context.dp_size = 1;
  context.optimizer_yaml = yaml.c_str();
  std::vector<triax_optimizer_param> c_params;
  for (size_t i = 0; i < params.size(); ++i) c_params.push_back({"p", borrow_handle(params[i]), i == 0 ? 0.1 : 0.0, 0});
  return std::make_unique<OptimizerInstance>(vtable, name, context, c_params);
}

inline std::unique_ptr<OptimizerInstance> make_optimizer(const std::string& name, const std::vector<at::Tensor>& params,
                                                         const std::string& yaml) {
  return make_optimizer(test_plugin_registry().optimizer(name), name, params, yaml);
}

inline std::string tiny_config(const fs::path& run_dir, int steps, int micro_batch_size, int accumulation,
                        const std::string& dtype = "float32") {
  return "general: {project: test, run: test, seed: 5, device: cpu}\n"
         "checkpoints: {checkpoints_path: " +
         run_dir.string() +
         ", checkpoint_interval: 1000}\n"
         "parallelism: {dp: 1, tp: 1, pp: 1, pp_engine: afab}\n"
         "model:\n"
         "  plugin: llama\n"
         "  dtype: " +
         dtype +
         "\n"
         "  init_method: {std: 0.02}\n"
         "  model_config: {vocab_size: 64, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,\n"
         "                 num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,\n"
         "                 tie_word_embeddings: true}\n"
         "tokens: {sequence_length: 32, micro_batch_size: " +
         std::to_string(micro_batch_size) + ", batch_accumulation_per_replica: " + std::to_string(accumulation) +
         ", train_steps: " + std::to_string(steps) +
         "}\n"
         "optimizer:\n"
         "  optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95, adam_eps: 1.0e-8, torch_adam_is_fused: "
         "true}\n"
         "  zero_stage: 0\n"
         "  weight_decay: 0.01\n"
         "  clip_grad: 1.0\n"
         "  accumulate_grad_in_fp32: true\n"
         "  learning_rate_scheduler: {learning_rate: 0.01, lr_warmup_steps: 5, lr_decay_style: cosine, min_decay_lr: "
         "0.001}\n"
         "data_stages: [{name: synthetic, start_training_step: 1, data: {dataset: null, seed: 3}}]\n"
         "logging: {log_level: warning, iteration_step_info_interval: 1}\n";
}

inline TrainSummary run(const std::string& yaml) {
  TrainConfig config = parse_train_config(YAML::Load(yaml), "test.yaml");
  SingleProcessCommunicator comm;
  Trainer trainer(std::move(config), test_plugin_registry(), comm);
  return trainer.train();
}

inline fs::path temp_run_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("triax_training_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

// bf16 runs of the tiny config with one micro-batch of `micro_batch_size` a step, every step
// clipped, on the ranks of `comm` (parallelism.dp = its world size), with ZeRO 0 and 1:
// accumulate_grad_in_fp32 true hands the bf16 gradients over as computed, false hands fp32 copies
// of them over. Both are exact, so each pair must agree bit for bit in every loss, gradient norm
// and final parameter. `run_dir(name)`: the run folder, one for all ranks.
template <typename RunDir>
void expect_bf16_handoffs_agree(int steps, int micro_batch_size, Communicator& comm, RunDir run_dir) {
  const int dp = comm.size(TRIAX_GROUP_WORLD);
  for (const std::string zero_stage : {"0", "1"}) {
    std::vector<TrainSummary> summaries;
    std::vector<std::vector<at::Tensor>> finals;
    for (const std::string fp32 : {"true", "false"}) {
      const fs::path dir = run_dir("handoff_" + zero_stage + fp32);
      std::string yaml = tiny_config(dir, steps, micro_batch_size, 1, "bfloat16");
      const auto replace = [&](const std::string& from, const std::string& to) {
        yaml.replace(yaml.find(from), from.size(), to);
      };
      replace("dp: 1,", "dp: " + std::to_string(dp) + ",");
      replace("accumulate_grad_in_fp32: true", "accumulate_grad_in_fp32: " + fp32);
      replace("zero_stage: 0", "zero_stage: " + zero_stage);
      replace("clip_grad: 1.0", "clip_grad: 0.05");  // every step clipped
      Trainer trainer(parse_train_config(YAML::Load(yaml), "test.yaml"), test_plugin_registry(), comm);
      summaries.push_back(trainer.train());
      finals.emplace_back();
      for (const NamedParameter& p : trainer.parameters()) finals.back().push_back(p.tensor.detach().clone());
      if (dp == 1) fs::remove_all(dir);  // other ranks may still be writing a shared folder
    }
    EXPECT_EQ(summaries[0].losses, summaries[1].losses) << "zero_stage " << zero_stage;
    EXPECT_EQ(summaries[0].grad_norms, summaries[1].grad_norms) << "zero_stage " << zero_stage;
    for (double norm : summaries[0].grad_norms) EXPECT_GT(norm, 0.05);
    ASSERT_EQ(finals[0].size(), finals[1].size());
    for (size_t k = 0; k < finals[0].size(); ++k)
      EXPECT_TRUE(at::equal(finals[0][k], finals[1][k])) << "zero_stage " << zero_stage << ", parameter " << k;
  }
}

}  // namespace triax::testing
