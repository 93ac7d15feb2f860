// The three plugins a training config names: the model (model.plugin, or chosen by marker or by a
// Hugging Face folder's architecture), the pipeline engine (parallelism.pp_engine) and the
// optimizer (optimizer.optimizer_factory.name with optimizer.zero_stage).
#pragma once

#include <functional>
#include <string>

#include "triax/abi.h"
#include "triax/config/train_config.hpp"
#include "triax/core/plugins/external_model_format.hpp"
#include "triax/core/plugins/plugin_registry.hpp"

namespace triax {

struct PluginChoice {
  const triax_model_vtable* model = nullptr;
  const triax_engine_vtable* engine = nullptr;
  const triax_optimizer_vtable* optimizer = nullptr;
};

// Fills in model.plugin where the config leaves it out (resolve_model_section, with the folder
// format `external` reads), then looks the three up. An unknown name is a PluginError that names the
// file and the key (with its line) before the registry's list of the available plugins.
PluginChoice choose_plugins(TrainConfig& config, const PluginRegistry& registry,
                            const ExternalModelFormat* external = nullptr);

// Runs `call`, a plugin reading part of the config from `origin`: a ConfigError it raises that does
// not name the file yet (a section handed over without to_located_yaml_text) gets it in front.
void in_config_file(const std::string& origin, const std::function<void()>& call);

}  // namespace triax
