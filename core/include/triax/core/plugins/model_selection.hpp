// Which model plugin a config means when it names none, and the model_config a folder of another
// format brings: nanotron configs carry a marker key in model_config (is_llama_config, ...) that
// the plugin declares; a Hugging Face folder names its architecture in config.json, which the
// format's library reads (ExternalModelFormat).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "triax/config/train_config.hpp"
#include "triax/core/plugins/external_model_format.hpp"
#include "triax/core/plugins/plugin_registry.hpp"

namespace triax {

// "a, b, c", or "none" for no items: how messages list the model plugins and what they read.
std::string name_list(const std::vector<std::string>& items);

// The model plugin whose nanotron marker (and the key it requires beside it) is present in
// `model_config`. None or several is a ConfigError naming `origin` and listing every model plugin
// with its marker.
std::string model_plugin_by_marker(const PluginRegistry& registry, const YAML::Node& model_config,
                                   const std::string& origin);

// Fills in model.plugin and model.model_config where the config leaves them out (and records
// them in config.resolved): with model.init_method.path naming a folder `external` holds (a
// Hugging Face folder), what that folder brings, with the keys the config gives laid over it;
// otherwise the plugin by marker. Without `external`, the path is a checkpoint's.
void resolve_model_section(TrainConfig& config, const PluginRegistry& registry,
                           const ExternalModelFormat* external = nullptr);

}  // namespace triax
