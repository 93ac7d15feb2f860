// What the config tests share: the test configs, and helpers that parse a config or catch the
// ConfigError it raises.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "triax/config_reader.hpp"
#include "triax/config/train_config.hpp"
#include "triax/error.hpp"

namespace triax::config_test {

inline const std::string kDataDir = TRIAX_TEST_DATA_DIR;
inline const std::string kTiny = kDataDir + "/nanotron_config_tiny_llama.yaml";
inline const std::string kMinimal = kDataDir + "/minimal.yaml";

inline const char* const kMinimalText = R"(
model:
  model_config: {hidden_size: 16}
  init_method: {std: 0.02}
tokens:
  sequence_length: 32
  train_steps: 10
  micro_batch_size: 2
  batch_accumulation_per_replica: 1
optimizer:
  learning_rate_scheduler:
    learning_rate: 0.001
)";

inline TrainConfig parse(const std::string& text) { return parse_train_config(YAML::Load(text), "test.yaml"); }

// The minimal config with `extra` YAML merged in through overrides-like edits of the tree.
inline TrainConfig parse_minimal_with(const std::vector<std::string>& sets) {
  YAML::Node root = YAML::Load(kMinimalText);
  for (const auto& s : sets) apply_override(root, s);
  return parse_train_config(root, "test.yaml");
}

// The message of the ConfigError `fn` throws; fails the test when it throws none.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

inline std::string minimal_error(const std::vector<std::string>& sets) {
  return error_of([&] { parse_minimal_with(sets); });
}

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace triax::config_test
