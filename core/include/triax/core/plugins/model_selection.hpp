// Which model plugin a config means when it names none, and the model_config a Hugging Face
// folder brings: nanotron configs carry a marker key in model_config (is_llama_config, ...)
// that the plugin declares; Hugging Face folders name their architecture in config.json.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "triax/config/train_config.hpp"
#include "triax/core/plugins/plugin_registry.hpp"

namespace triax {

// The model plugin whose nanotron marker (and the key it requires beside it) is present in
// `model_config`. None or several is a ConfigError naming `origin` and listing every model plugin
// with its marker.
std::string model_plugin_by_marker(const PluginRegistry& registry, const YAML::Node& model_config,
                                   const std::string& origin);

// The model plugin whose Hugging Face architectures include config.json's. None is a PluginError
// naming `config_path` and its architectures, listing every model plugin with those it reads.
std::string model_plugin_by_architecture(const PluginRegistry& registry, const std::string& config_json,
                                         const std::string& config_path);

// Fills in model.plugin and model.model_config where the config leaves them out (and records
// them in config.resolved): with model.init_method.path naming a Hugging Face folder, the plugin
// that reads its architecture and the model_config its config.json translates to, with the keys
// the config gives laid over it (triax/interop/hf_config_overlay.hpp); otherwise the plugin by marker.
void resolve_model_section(TrainConfig& config, const PluginRegistry& registry);

}  // namespace triax
