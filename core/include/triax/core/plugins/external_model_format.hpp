// A folder format other than the checkpoint store's that holds a model (a Hugging Face folder),
// which a run may start from (model.init_method.path): the model section its config brings, its
// weights, and the model's size as a plugin's mapping to that format lists it. The core reads
// only its own checkpoints; a library above it implements this interface
// (triax/convert/hf_model_format.hpp) and apps/ hands it to the Trainer.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "triax/config/train_config.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/parameter.hpp"

namespace triax {

// Fills one parameter: calls `copy` with the tensor that takes the stored values (the parameter
// itself, or a ZeRO-3 piece's whole box, whose piece is copied back afterwards).
using ParameterFill =
    std::function<void(const NamedParameter& parameter, const std::function<void(const NamedParameter&)>& copy)>;

class ExternalModelFormat {
 public:
  virtual ~ExternalModelFormat() = default;

  // Whether `path` is a folder of this format (any other model.init_method.path is a checkpoint).
  virtual bool holds(const std::string& path) const = 0;
  // For a run starting from `folder`: model.plugin where the config names none (the plugin that
  // reads the folder), and model.model_config from the folder's own config, with the keys the
  // config gives laid over it. Errors name the config file or the folder.
  virtual void resolve_model_section(TrainConfig& config, const PluginRegistry& registry,
                                     const std::string& folder) const = 0;
  // Copies the weights of `folder`, read with the mapping of model plugin `plugin`, into this
  // rank's `parameters`, each through `fill`. `every_name_held`: every rank holds every parameter
  // name (no pipeline stages), so a stored tensor that no parameter takes is an error.
  virtual void load_weights(const std::string& folder, const std::vector<NamedParameter>& parameters,
                            const PluginRegistry& registry, const std::string& plugin, bool every_name_held,
                            const ParameterFill& fill) const = 0;
  // The parameter elements of a `plugin` model of `model_yaml`, each parameter once, before it is
  // built; nullopt for a plugin without a mapping to this format.
  virtual std::optional<double> parameter_elements(const PluginRegistry& registry, const std::string& plugin,
                                                   const std::string& model_yaml) const = 0;
};

}  // namespace triax
