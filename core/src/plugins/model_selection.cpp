#include "triax/core/plugins/model_selection.hpp"

#include <filesystem>

#include "triax/interop/hf_config_overlay.hpp"
#include "triax/core/plugins/model_hf_mapping.hpp"
#include "triax/core/plugins/plugin_choice.hpp"
#include "triax/error.hpp"
#include "triax/interop/hf_folder.hpp"

namespace triax {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "none" : out;
}

bool present(const YAML::Node& model_config, const char* key) {
  if (key == nullptr || !model_config.IsMap()) return false;
  const YAML::Node value = model_config[key];
  return value.IsDefined() && !value.IsNull() && !(value.IsScalar() && value.Scalar() == "false");
}

std::string marker_text(const ModelPluginExtras& extras) {
  if (extras.nanotron_marker == nullptr) return "no marker";
  std::string text = extras.nanotron_marker;
  if (extras.nanotron_marker_requires != nullptr) text += std::string(" with ") + extras.nanotron_marker_requires;
  return text;
}

}  // namespace

std::string model_plugin_by_marker(const PluginRegistry& registry, const YAML::Node& model_config,
                                   const std::string& origin) {
  // `specific`: the matches whose marker also requires a key. Such a match is more specific than
  // another plugin's same marker alone, so the one specific match wins.
  std::vector<std::string> matching, specific, listed;
  for (const PluginRecord& record : registry.plugins()) {
    if (record.kind != TRIAX_PLUGIN_MODEL) continue;
    const ModelPluginExtras extras = model_plugin_extras(*static_cast<const triax_model_vtable*>(record.vtable));
    listed.push_back(record.name + " (" + marker_text(extras) + ")");
    if (!present(model_config, extras.nanotron_marker)) continue;
    if (extras.nanotron_marker_requires == nullptr) {
      matching.push_back(record.name);
    } else if (present(model_config, extras.nanotron_marker_requires)) {
      matching.push_back(record.name);
      specific.push_back(record.name);
    }
  }
  if (matching.size() == 1) return matching.front();
  if (specific.size() == 1) return specific.front();
  const std::string where = origin.empty() ? "" : origin + ": ";
  if (matching.empty())
    throw ConfigError(where +
                      "model.plugin: not given, and model.model_config holds no model plugin's marker key; "
                      "name the plugin or add its marker (model plugins: " +
                      join(listed) + ")");
  throw ConfigError(where + "model.plugin: not given, and model.model_config holds the markers of several model " +
                    "plugins (" + join(matching) + "); name one (model plugins: " + join(listed) + ")");
}

std::string model_plugin_by_architecture(const PluginRegistry& registry, const std::string& config_json,
                                         const std::string& config_path) {
  const std::vector<std::string> architectures = interop::hf_architectures(config_json, config_path);
  std::vector<std::string> listed;
  for (const PluginRecord& record : registry.plugins()) {
    if (record.kind != TRIAX_PLUGIN_MODEL) continue;
    const ModelPluginExtras extras = model_plugin_extras(*static_cast<const triax_model_vtable*>(record.vtable));
    std::vector<std::string> reads;
    for (int32_t i = 0; extras.hf != nullptr && i < extras.hf->architecture_count; ++i)
      reads.emplace_back(extras.hf->architectures[i]);
    for (const std::string& name : reads)
      for (const std::string& wanted : architectures)
        if (name == wanted) return record.name;
    listed.push_back(record.name + " (" + (reads.empty() ? "no Hugging Face mapping" : join(reads)) + ")");
  }
  throw PluginError(config_path + ": architectures [" + join(architectures) +
                    "]: no model plugin reads this architecture (model plugins: " + join(listed) + ")");
}

void resolve_model_section(TrainConfig& config, const PluginRegistry& registry) {
  ModelSection& model = config.model;
  const YAML::Node path = static_cast<const YAML::Node&>(model.init_method)["path"];
  const std::string folder = path.IsDefined() && path.IsScalar() ? path.Scalar() : "";
  const bool from_hf = !folder.empty() && interop::is_hf_folder(folder);
  const bool needs_config = !model.model_config.IsDefined() || model.model_config.IsNull();
  if (from_hf) {
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
  if (!model.model_config.IsDefined() || model.model_config.IsNull())
    throw ConfigError(config.origin +
                      ": model.model_config: required key is missing (only a Hugging Face folder in "
                      "model.init_method.path can stand in for it)");
  if (model.plugin.empty()) model.plugin = model_plugin_by_marker(registry, model.model_config, config.origin);
  config.resolved["model"]["plugin"] = model.plugin;
  config.resolved["model"]["model_config"] = YAML::Clone(model.model_config);
}

}  // namespace triax
