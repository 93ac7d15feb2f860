// Host side of a model plugin's Hugging Face mapping (triax_model_hf_vtable, ABI 1.3): the
// architectures it reads, config.json <-> model_config, and its tensor map, as C++ calls whose
// failures are exceptions naming the plugin (and config.json where it is concerned); and the
// plugin that reads a folder's architecture.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/hf_mapping.hpp"

namespace triax {

class ModelHfMapping {
 public:
  // The mapping of model plugin `plugin`; one without a mapping is a PluginError saying so.
  ModelHfMapping(const PluginRegistry& registry, const std::string& plugin);

  const std::string& plugin() const { return plugin_; }
  const std::vector<std::string>& architectures() const { return architectures_; }
  // config.json's text -> model_config (YAML text); errors name `config_path`.
  std::string config_from_hf(const std::string& config_json, const std::string& config_path) const;
  // model_config (YAML text) -> {config.json, generation_config.json} for weights of `dtype`.
  std::pair<std::string, std::string> config_to_hf(const std::string& model_config_yaml,
                                                   const std::string& dtype) const;
  std::vector<HfTensorRule> tensor_map(const std::string& model_config_yaml) const;

 private:
  std::string plugin_;
  const triax_model_hf_vtable* hf_ = nullptr;
  std::vector<std::string> architectures_;
};

// "model plugin 'x'": how messages name a plugin.
std::string model_plugin_label(const std::string& plugin);

// The model plugin whose Hugging Face architectures include config.json's. None is a PluginError
// naming `config_path` and its architectures, listing every model plugin with those it reads.
std::string model_plugin_by_architecture(const PluginRegistry& registry, const std::string& config_json,
                                         const std::string& config_path);

}  // namespace triax
