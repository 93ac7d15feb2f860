// The model `triax generate` runs: where it comes from (a triax checkpoint, a Hugging Face
// folder, or a training config with its own initialisation), its tokenizer and end-of-text
// tokens, and its instance at the launch's tensor-parallel size with the weights loaded.
// Everything model-specific comes from the plugin through the ABI (its model_config, its
// Hugging Face mapping); nothing here names a model.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "triax/config/train_config.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/plugins/plugin_registry.hpp"

namespace triax {
class Communicator;
class HostServices;
}  // namespace triax

namespace triax::generation {

struct GenerationModelSpec {
  std::string origin;  // the folder or config file, as messages name it
  std::string plugin;
  std::string model_config_yaml;
  std::string init_method_yaml = "{}";  // the plugin's own initialisation (model.init_method less path)
  std::string weights;                  // checkpoint or Hugging Face folder to load; empty: none (random)
  std::string dtype = "float32";        // of the stored weights, or the config's model.dtype
  int64_t make_vocab_size_divisible_by = 1;
  uint64_t seed = 42;
  std::string device = "auto";  // general.device of a config; auto otherwise
  // Where a tokenizer.json may be, most specific first.
  std::vector<std::string> tokenizer_candidates;
  // End-of-text ids the model's own files state (generation_config.json, config.json, or the
  // plugin's Hugging Face translation of model_config), and where they came from.
  std::vector<int64_t> eos;
  std::string eos_origin;
  // Whether those ids were stated for this model (a Hugging Face folder) rather than a model_config
  // default that the tokenizer the data was made with should override.
  bool eos_stated = false;
};

// A triax checkpoint (a step folder, or a run folder whose `latest` names one) or a Hugging Face
// folder (config.json and weights). Errors name the folder and the missing file.
GenerationModelSpec spec_from_folder(const PluginRegistry& registry, const std::string& path);
// A training config's model section: its init_method.path weights, or the plugin's initialisation.
GenerationModelSpec spec_from_config(const PluginRegistry& registry, TrainConfig config);

// The first tokenizer.json among the candidates, if any exists.
std::optional<std::string> find_tokenizer(const GenerationModelSpec& spec);

// This rank's instance of the whole model (every block: no pipeline), tensor-parallel over the
// communicator's tp group, in `dtype`, with the spec's weights loaded; in inference mode.
std::unique_ptr<ModelInstance> create_generation_model(const PluginRegistry& registry, const GenerationModelSpec& spec,
                                                       Communicator& communicator, const HostServices& host,
                                                       const c10::Device& device, const std::string& dtype);

}  // namespace triax::generation
