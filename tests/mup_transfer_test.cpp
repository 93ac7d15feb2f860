// Learning-rate transfer across width on the synthetic stream: a grid of learning rates, a factor
// 2 apart, trained briefly on a tiny Llama at hidden size 64 and at 256 (CPU, fp32). With spectral
// muP (model.init_method: {use_mup: true}) the best learning rate at 256 is the best at 64 or one
// grid step from it; with the standard parametrisation ({std: 0.02}, one learning rate for all)
// it moves by more. The table of final losses is printed for the record.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

#include "test_plugin_registry.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/config/train_config.hpp"
#include "triax/core/trainer.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 40;
constexpr int kScoredSteps = 10;  // the score is the mean loss of the last steps
const std::vector<double> kGrid = {1.0 / 2048, 1.0 / 1024, 1.0 / 512, 1.0 / 256, 1.0 / 128,
                                   1.0 / 64,   1.0 / 32,   1.0 / 16,  1.0 / 8};

std::string config_yaml(int width, double learning_rate, const std::string& init_method, const fs::path& run_dir) {
  const std::string h = std::to_string(width);
  return "general: {project: mup, run: transfer, seed: 11, device: cpu}\n"
         "checkpoints: {checkpoints_path: " + run_dir.string() +
         ", checkpoint_interval: 0, save_final_state: false}\n"  // no checkpoint: only the losses count
         "parallelism: {dp: 1, tp: 1, pp: 1, pp_engine: afab}\n"
         "model:\n"
         "  plugin: llama\n"
         "  dtype: float32\n"
         "  init_method: " + init_method + "\n"
         "  make_vocab_size_divisible_by: 1\n"
         "  model_config: {vocab_size: 256, hidden_size: " + h + ", intermediate_size: " + std::to_string(2 * width) +
         ", num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, max_position_embeddings: 32,\n"
         "                 tie_word_embeddings: false}\n"
         "tokens: {sequence_length: 32, micro_batch_size: 8, batch_accumulation_per_replica: 1, train_steps: " +
         std::to_string(kSteps) + "}\n"
         "optimizer:\n"
         "  optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95, adam_eps: 1.0e-8}\n"
         "  zero_stage: 0\n"
         "  weight_decay: 0.0\n"
         "  clip_grad: 1.0\n"
         "  accumulate_grad_in_fp32: true\n"
         "  learning_rate_scheduler: {learning_rate: " + std::to_string(learning_rate) +
         ", lr_warmup_steps: 4, lr_decay_style: cosine}\n"
         "data_stages: [{name: synthetic, start_training_step: 1, data: {dataset: null, seed: 5}}]\n"
         "logging: {log_level: warning, iteration_step_info_interval: 1000}\n";
}

// Mean loss over the last kScoredSteps steps; a diverged run scores infinity.
double score(int width, double learning_rate, const std::string& init_method) {
  const fs::path dir = fs::temp_directory_path() / ("triax_mup_transfer_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  TrainConfig config = parse_train_config(YAML::Load(config_yaml(width, learning_rate, init_method, dir)), "mup.yaml");
  SingleProcessCommunicator comm;
  Trainer trainer(std::move(config), testing::test_plugin_registry(), comm);
  TrainSummary summary;
  try {
    summary = trainer.train();
  } catch (const Error& e) {  // the trainer stops a diverged run
    fs::remove_all(dir);
    if (std::string(e.what()).find("training diverged") == std::string::npos) throw;
    return std::numeric_limits<double>::infinity();
  }
  fs::remove_all(dir);
  const double mean = std::accumulate(summary.losses.end() - kScoredSteps, summary.losses.end(), 0.0) / kScoredSteps;
  return std::isfinite(mean) ? mean : std::numeric_limits<double>::infinity();
}

// Index in kGrid of the best learning rate at `width`, printing the row of scores.
int best_index(int width, const std::string& init_method, const char* label) {
  std::vector<double> scores;
  for (double lr : kGrid) scores.push_back(score(width, lr, init_method));
  std::printf("%-8s width %3d:", label, width);
  for (double s : scores) std::printf(" %.4f", s);
  const int best = static_cast<int>(std::min_element(scores.begin(), scores.end()) - scores.begin());
  std::printf("  best lr %g\n", kGrid[static_cast<size_t>(best)]);
  return best;
}

TEST(MupTransfer, BestLearningRateHoldsAcrossWidthWithMupAndMovesWithout) {
  std::printf("learning rates:");
  for (double lr : kGrid) std::printf(" %g", lr);
  std::printf("\n");
  const int mup_narrow = best_index(64, "{use_mup: true}", "muP");
  const int mup_wide = best_index(256, "{use_mup: true}", "muP");
  const int sp_narrow = best_index(64, "{std: 0.02}", "standard");
  const int sp_wide = best_index(256, "{std: 0.02}", "standard");
  EXPECT_LE(std::abs(mup_wide - mup_narrow), 1) << "muP: the best learning rate moved from " << kGrid[mup_narrow]
                                                << " to " << kGrid[mup_wide];
  EXPECT_GE(std::abs(sp_wide - sp_narrow), 2) << "standard: the best learning rate stayed near " << kGrid[sp_narrow]
                                              << " (" << kGrid[sp_wide] << " at width 256)";
}

}  // namespace
}  // namespace triax
