#include "triax/convert/hf_model_format.hpp"

#include <filesystem>
#include <set>

#include "triax/convert/hf_weights.hpp"
#include "triax/convert/model_hf_mapping.hpp"
#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/core/plugins/plugin_choice.hpp"
#include "triax/interop/hf_config_overlay.hpp"
#include "triax/interop/hf_folder.hpp"
#include "triax/report/log.hpp"

namespace triax {

bool HfModelFormat::holds(const std::string& path) const { return interop::is_hf_folder(path); }

void HfModelFormat::resolve_model_section(TrainConfig& config, const PluginRegistry& registry,
                                          const std::string& folder) const {
  ModelSection& model = config.model;
  const bool needs_config = !model.model_config.IsDefined() || model.model_config.IsNull();
  const std::string config_path = (std::filesystem::path(folder) / interop::kHfConfigFile).string();
  const std::string config_json = interop::read_hf_config(folder);
  if (model.plugin.empty()) model.plugin = model_plugin_by_architecture(registry, config_json, config_path);
  const ModelHfMapping mapping(registry, model.plugin);
  const YAML::Node translated = YAML::Load(mapping.config_from_hf(config_json, config_path));
  // Keys given beside the folder change what they name; the folder's config.json gives the rest.
  if (needs_config)
    model.model_config = translated;
  else
    in_config_file(config.origin, [&] {
      const auto tensor_map = [&](const std::string& yaml) { return mapping.tensor_map(yaml); };
      model.model_config = interop::overlay_hf_model_config(tensor_map, translated, model.model_config, config.origin,
                                                            folder);
    });
}

void HfModelFormat::load_weights(const std::string& folder, const std::vector<NamedParameter>& parameters,
                                 const PluginRegistry& registry, const std::string& plugin, bool every_name_held,
                                 const ParameterFill& fill) const {
  const checkpoint::HfModel model = checkpoint::read_hf_model(registry, folder, plugin);
  std::set<std::string> used;
  for (const NamedParameter& p : parameters) {
    auto it = model.parameters.find(p.name);
    if (it == model.parameters.end())
      throw checkpoint::CheckpointError("Hugging Face folder " + folder + " has no tensor " + p.name +
                            " (a model of another shape, or tied where this one is not?)");
    fill(p, [&](const NamedParameter& target) {
      checkpoint::copy_shard_from_whole(target, it->second, "Hugging Face folder " + folder);
    });
    used.insert(p.name);
  }
  if (every_name_held)
    for (const auto& [name, tensor] : model.parameters)
      if (!used.count(name))
        throw checkpoint::CheckpointError("Hugging Face folder " + folder + " holds " + name +
                              ", which this model does not have (untied head into a tied model?)");
  log::info("model.init_method.path: weights from the Hugging Face folder " + folder);
}

// The tensor map lists every parameter with its whole shape; a tied head reads the embedding's.
std::optional<double> HfModelFormat::parameter_elements(const PluginRegistry& registry, const std::string& plugin,
                                                        const std::string& model_yaml) const {
  if (model_plugin_extras(registry.model(plugin)).hf == nullptr) return std::nullopt;
  std::set<std::string> counted;
  double elements = 0.0;
  for (const HfTensorRule& rule : ModelHfMapping(registry, plugin).tensor_map(model_yaml)) {
    if (rule.kind == TRIAX_HF_IGNORE || !counted.insert(rule.triax_name).second) continue;
    double numel = 1.0;
    for (const int64_t size : rule.shape) numel *= static_cast<double>(size);
    elements += numel;
  }
  return elements;
}

}  // namespace triax
