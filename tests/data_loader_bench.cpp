// Loader throughput: how many tokens per second TrainingData delivers as step batches (mixture
// lookup, permutation, copy out of the memory-mapped files into the batch tensor), with the
// consumer doing nothing else. Without --folder it first writes random uint16 token files.
//
//   data_loader_bench [--folder DIR]... [--tokens N] [--datasets K] [--sequence-length L]
//                     [--micro-batch-size B] [--micro-batches M] [--steps S]
#include <ATen/ATen.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "triax/config/train_config.hpp"
#include "triax/data/training_data.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<std::string> folders;
  int64_t tokens = 256 << 20, datasets = 3, sequence = 2048, micro_batch = 8, micro_batches = 4, steps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--folder")
      folders.push_back(value);
    else if (key == "--tokens")
      tokens = std::atoll(value.c_str());
    else if (key == "--datasets")
      datasets = std::atoll(value.c_str());
    else if (key == "--sequence-length")
      sequence = std::atoll(value.c_str());
    else if (key == "--micro-batch-size")
      micro_batch = std::atoll(value.c_str());
    else if (key == "--micro-batches")
      micro_batches = std::atoll(value.c_str());
    else if (key == "--steps")
      steps = std::atoll(value.c_str());
    else {
      std::cerr << "unknown option " << key << "\n";
      return 2;
    }
  }
  fs::path scratch;
  if (folders.empty()) {
    scratch = fs::temp_directory_path() / ("triax_loader_bench_" + std::to_string(::getpid()));
    std::mt19937 rng(1);
    std::vector<uint16_t> buffer(static_cast<size_t>(tokens / datasets));
    for (int64_t d = 0; d < datasets; ++d) {
      const fs::path folder = scratch / ("dataset_" + std::to_string(d));
      fs::create_directories(folder);
      for (auto& t : buffer) t = static_cast<uint16_t>(rng() % 50000);
      std::ofstream(folder / "tokens.ds", std::ios::binary)
          .write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size() * 2));
      folders.push_back(folder.string());
    }
    std::cout << "wrote " << datasets << " datasets of " << buffer.size() << " random uint16 tokens under " << scratch
              << "\n";
  }
  std::string list, weights;
  for (size_t i = 0; i < folders.size(); ++i) {
    list += (i ? ", " : "") + folders[i];
    weights += (i ? ", " : "") + std::to_string(i + 1);
  }
  const std::string yaml =
      "model: {model_config: {vocab_size: 65536}, init_method: {std: 0.02}}\n"
      "tokens: {sequence_length: " +
      std::to_string(sequence) + ", micro_batch_size: " + std::to_string(micro_batch) +
      ", batch_accumulation_per_replica: " + std::to_string(micro_batches) + ", train_steps: " + std::to_string(steps) +
      "}\n"
      "optimizer: {learning_rate_scheduler: {learning_rate: 0.001}}\n"
      "data_stages: [{name: bench, start_training_step: 1, data: {seed: 1, dataset: "
      "{dataset_folder: [" +
      list + "], dataset_weights: [" + weights + "]}}}]\n";
  int rc = 0;
  try {
    const triax::TrainConfig config = triax::parse_train_config(YAML::Load(yaml), "bench");
    triax::data::BatchLayout layout{sequence, micro_batch, micro_batches, 0, 1};
    const auto open_start = std::chrono::steady_clock::now();
    triax::data::TrainingData data(config, 65536, layout);
    const double open_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - open_start).count();
    int64_t checksum = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t step = 1; step <= steps; ++step) checksum += data.step_samples(step)[0][0].item<int64_t>();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double delivered = static_cast<double>(steps * layout.rank_samples_per_step() * sequence);
    std::cout << "opened and checked " << folders.size() << " datasets in " << open_seconds << " s\n"
              << steps << " steps of " << layout.rank_samples_per_step() << " samples x " << sequence << " tokens in "
              << seconds << " s: " << delivered / seconds / 1e6 << " M tokens/s (checksum " << checksum << ")\n";
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    rc = 1;
  }
  if (!scratch.empty()) fs::remove_all(scratch);
  return rc;
}
