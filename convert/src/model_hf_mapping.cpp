#include "triax/convert/model_hf_mapping.hpp"

#include <cstdio>

#include "triax/core/plugins/model_selection.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/error.hpp"
#include "triax/interop/hf_folder.hpp"

namespace triax {
namespace {

void append_text(void* self, const char* text, size_t length) { static_cast<std::string*>(self)->append(text, length); }

triax_text_sink sink_into(std::string& text) { return {&text, append_text}; }

}  // namespace

std::string model_plugin_label(const std::string& plugin) { return "model plugin '" + plugin + "'"; }

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
    listed.push_back(record.name + " (" + (reads.empty() ? "no Hugging Face mapping" : name_list(reads)) + ")");
  }
  throw PluginError(config_path + ": architectures [" + name_list(architectures) +
                    "]: no model plugin reads this architecture (model plugins: " + name_list(listed) + ")");
}

ModelHfMapping::ModelHfMapping(const PluginRegistry& registry, const std::string& plugin) : plugin_(plugin) {
  hf_ = model_plugin_extras(registry.model(plugin)).hf;
  if (hf_ == nullptr)
    throw PluginError(model_plugin_label(plugin) + " (" + registry.find(TRIAX_PLUGIN_MODEL, plugin).library_path +
                      ") has no Hugging Face mapping, so its models cannot be converted to or from Hugging Face "
                      "folders (a plugin offers one through its vtable's `hf` member, ABI 1.3)");
  for (int32_t i = 0; i < hf_->architecture_count; ++i) architectures_.emplace_back(hf_->architectures[i]);
}

std::string ModelHfMapping::config_from_hf(const std::string& config_json, const std::string& config_path) const {
  std::string yaml;
  const triax_text_sink sink = sink_into(yaml);
  triax_error error{};
  const triax_status status = hf_->config_from_hf(config_json.c_str(), &sink, &error);
  if (status != TRIAX_OK) {
    // The SDK's messages start with "config.json: <key>": name the file itself.
    const std::string message = error.message;
    const std::string prefix = "config.json: ";
    const std::string detail = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
    throw ConfigError(config_path + ": " + detail + " (read by " + model_plugin_label(plugin_) + ")");
  }
  return yaml;
}

std::pair<std::string, std::string> ModelHfMapping::config_to_hf(const std::string& model_config_yaml,
                                                                 const std::string& dtype) const {
  std::string config, generation;
  const triax_text_sink config_sink = sink_into(config), generation_sink = sink_into(generation);
  triax_error error{};
  const triax_status status =
      hf_->config_to_hf(model_config_yaml.c_str(), dtype.c_str(), &config_sink, &generation_sink, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, model_plugin_label(plugin_));
  return {config, generation};
}

std::vector<HfTensorRule> ModelHfMapping::tensor_map(const std::string& model_config_yaml) const {
  struct Collect {
    std::vector<HfTensorRule> rules;
    static triax_status add(void* self, const triax_hf_tensor_rule* rule, triax_error* error) {
      try {
        static_cast<Collect*>(self)->rules.push_back(HfTensorRule::from_c(*rule));
        return TRIAX_OK;
      } catch (const std::exception& e) {
        std::snprintf(error->message, sizeof error->message, "%s", e.what());
        return TRIAX_ERROR_INVALID_ARGUMENT;
      }
    }
  } collect;
  const triax_hf_rule_sink sink{&collect, Collect::add};
  triax_error error{};
  const triax_status status = hf_->tensor_map(model_config_yaml.c_str(), &sink, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, model_plugin_label(plugin_));
  return std::move(collect.rules);
}

}  // namespace triax
