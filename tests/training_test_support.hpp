// Whole training runs in the test process, shared by the training tests: a tiny Llama config on
// the synthetic stream, run on one CPU rank.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "test_plugin_registry.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/config.hpp"
#include "triax/core/trainer.hpp"

namespace triax::testing {

namespace fs = std::filesystem;

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

}  // namespace triax::testing
