// Hugging Face folders as the core's ExternalModelFormat: a run (or a generation) starting from
// one through model.init_method.path. The plugin that reads config.json's architecture, or the one
// the config names, translates it into model_config and gives the tensor map the weights are read
// with; the same map gives a model's size before it is built.
#pragma once

#include "triax/core/plugins/external_model_format.hpp"

namespace triax {

class HfModelFormat final : public ExternalModelFormat {
 public:
  bool holds(const std::string& path) const override;
  void resolve_model_section(TrainConfig& config, const PluginRegistry& registry,
                             const std::string& folder) const override;
  void load_weights(const std::string& folder, const std::vector<NamedParameter>& parameters,
                    const PluginRegistry& registry, const std::string& plugin, bool every_name_held,
                    const ParameterFill& fill) const override;
  std::optional<double> parameter_elements(const PluginRegistry& registry, const std::string& plugin,
                                           const std::string& model_yaml) const override;
};

}  // namespace triax
