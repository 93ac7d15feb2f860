// `triax train --check`: everything a training run checks before any work that does not depend on
// the launch, without building the model or opening data: the config (already loaded strictly),
// the three plugins it names, the sections each plugin reads (model.model_config through the
// model plugin's own parser, parallelism through the engine, optimizer through the optimizer) and
// the data source each stage names.
// Left to the run itself: the world size, splits that depend on the mesh (heads by tp, layers by
// pp), model.init_method (the model plugin reads it when it builds the model) and the data files.
#pragma once

#include "triax/config/train_config.hpp"
#include "triax/core/plugins/plugin_registry.hpp"

namespace triax {

// Throws ConfigError (exit 2) or PluginError (exit 3) naming the file and the key.
void check_run(TrainConfig& config, const PluginRegistry& registry);

}  // namespace triax
