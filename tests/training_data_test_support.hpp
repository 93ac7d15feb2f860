// What the tests of a run's data share: datasets whose tokens name their sample, and a run
// config around a data_stages list.
#pragma once

#include <ATen/ATen.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string>

#include "triax/data/training_data.hpp"
#include "data_test_support.hpp"
#include "triax/config/train_config.hpp"

namespace triax::data::test {

// Token t of sample s in folder d is d * 10000 + s * (L + 1) + t, so a sample names itself.
constexpr int64_t kSequence = 7;
inline void write_dataset(const fs::path& folder, int dataset, int64_t samples, int files = 2) {
  const int64_t per_file = (samples + files - 1) / files;
  for (int f = 0, s = 0; f < files && s < samples; ++f) {
    const int64_t n = std::min<int64_t>(per_file, samples - s);
    write_token_file(folder / ("part_" + std::to_string(f) + ".ds"),
                     iota_tokens(static_cast<size_t>(n * (kSequence + 1)),
                                 static_cast<uint32_t>(dataset * 10000 + s * (kSequence + 1))),
                     4);
    s += static_cast<int>(n);
  }
}
inline int dataset_of(const at::Tensor& row) { return static_cast<int>(row[0].item<int64_t>() / 10000); }
inline int64_t sample_of(const at::Tensor& row) { return (row[0].item<int64_t>() % 10000) / (kSequence + 1); }

// `tokens_extra`: more keys of the tokens section (", val_check_interval: 5").
inline TrainConfig run_config(const std::string& stages, int64_t train_steps = 20,
                              const std::string& tokens_extra = "") {
  const std::string yaml = R"(
model: {model_config: {vocab_size: 40000}, init_method: {std: 0.02}}
tokens: {sequence_length: 7, micro_batch_size: 2, batch_accumulation_per_replica: 3, train_steps: )" +
                           std::to_string(train_steps) + tokens_extra + R"(}
optimizer: {learning_rate_scheduler: {learning_rate: 0.001}}
data_stages: )" + stages;
  return parse_train_config(YAML::Load(yaml), "run.yaml");
}

inline BatchLayout layout(int64_t dp_rank = 0, int64_t dp_size = 1) { return {kSequence, 2, 3, dp_rank, dp_size}; }

}  // namespace triax::data::test
