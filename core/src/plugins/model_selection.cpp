#include "triax/core/plugins/model_selection.hpp"

#include "triax/error.hpp"

namespace triax {
namespace {

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

std::string name_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "none" : out;
}

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
                      name_list(listed) + ")");
  throw ConfigError(where + "model.plugin: not given, and model.model_config holds the markers of several model " +
                    "plugins (" + name_list(matching) + "); name one (model plugins: " + name_list(listed) + ")");
}

void resolve_model_section(TrainConfig& config, const PluginRegistry& registry, const ExternalModelFormat* external) {
  ModelSection& model = config.model;
  const YAML::Node path = static_cast<const YAML::Node&>(model.init_method)["path"];
  const std::string folder = path.IsDefined() && path.IsScalar() ? path.Scalar() : "";
  if (external != nullptr && !folder.empty() && external->holds(folder))
    external->resolve_model_section(config, registry, folder);
  if (!model.model_config.IsDefined() || model.model_config.IsNull())
    throw ConfigError(config.origin +
                      ": model.model_config: required key is missing (only a Hugging Face folder in "
                      "model.init_method.path can stand in for it)");
  if (model.plugin.empty()) model.plugin = model_plugin_by_marker(registry, model.model_config, config.origin);
  config.resolved["model"]["plugin"] = model.plugin;
  config.resolved["model"]["model_config"] = YAML::Clone(model.model_config);
}

}  // namespace triax
