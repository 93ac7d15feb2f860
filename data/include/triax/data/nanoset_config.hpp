// A data stage's `dataset` section in nanotron's NanosetDatasetsArgs schema, read strictly.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace triax::data {

struct NanosetConfig {
  std::vector<std::string> dataset_folder;                 // one string or a list
  std::optional<std::vector<double>> dataset_weights;      // null: proportional to the datasets' sizes
  std::vector<std::string> dataset_read_path;              // empty, or one per folder: read there if it exists
  std::optional<std::string> tokenizer_name;               // must match the files' metadata
  std::optional<int64_t> vocab_size;                       // must match model.model_config.vocab_size
  std::optional<int> token_size_in_bytes;                  // 2 or 4; else from the metadata, else 2
  bool return_positions = true;                            // accepted; see docs/data-format.md
  bool skip_in_stream = false;                             // accepted; resumption is exact either way
  std::optional<std::vector<int64_t>> dataset_max_tokens;  // per folder: use at most this many tokens
  bool shuffle_files = false;                              // a seeded file order instead of by name
  YAML::Node resolved;                                     // the section as read, defaults included

  // The folder each dataset is read from: dataset_read_path[i] when given and present.
  std::string read_folder(size_t i) const;
};

// `path` is the section's key path ("data_stages.0.data.dataset"), `origin` the config file.
// Throws ConfigError naming the key and what is wrong.
NanosetConfig parse_nanoset_config(const YAML::Node& dataset, const std::string& path, const std::string& origin);

}  // namespace triax::data
