// What the reference's files share: the section tables, and the loader run on small configs
// (probes), which the rendering takes the defaults from and the drift check tests against.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "config_reference.hpp"

namespace triax::config_reference {

std::vector<Section> run_sections();       // keys_run.cpp
std::vector<Section> training_sections();  // keys_training.cpp

// One config given to the loader and what the loader recorded of it (TrainConfig::resolved, with
// each data stage's token-folder section replaced by what the data loader's reader recorded).
struct Probe {
  YAML::Node input;
  YAML::Node resolved;
};

// The loader on `input`: the resolved tree, or the ConfigError's message.
struct LoaderResult {
  std::optional<YAML::Node> resolved;
  std::string error;
};
LoaderResult run_loader(const YAML::Node& input);

// The probes: a config with only the required keys, and one that also gives every optional
// section with only its own required keys (a checkpoints folder, a profiler, two data stages of
// which the second reads a token folder).
const std::vector<Probe>& probes();

// A key's full path ("data_stages[].data.seed") -> the YAML path in a document, choosing for each
// "[]" the first list item that holds the key's parent mapping (std::nullopt when none does).
std::optional<std::vector<std::string>> locate(const YAML::Node& document, const std::string& full_path);
// The node at a located path (undefined when absent); the path's text as messages write it.
YAML::Node node_at(const YAML::Node& document, const std::vector<std::string>& path);
std::string path_text(const std::vector<std::string>& path);

std::string full_path(const Section& section, const Key& key);

}  // namespace triax::config_reference
