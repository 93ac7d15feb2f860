#include "triax/interop/hf_config_overlay.hpp"

#include <map>
#include <optional>
#include <vector>

#include "triax/config_reader.hpp"
#include "triax/error.hpp"
#include "triax/located_yaml.hpp"
#include "triax/tensor_text.hpp"

namespace triax::interop {
namespace {

// `top` laid over `base`: mappings on both sides merged key by key, anything else of top taking
// base's place. top's keys come first and keep their place in the file; base's follow as copies
// (YAML::Clone: no place), so that the text handed to the plugin still puts top's on their lines.
YAML::Node lay_over(const YAML::Node& base, const YAML::Node& top) {
  if (!base.IsMap() || !top.IsMap()) return top;
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& entry : top) {
    const std::string key = entry.first.Scalar();
    // The key node itself: the text handed to the plugin places a value by its key's line.
    out[entry.first] = base[key] ? lay_over(base[key], entry.second) : entry.second;
  }
  for (const auto& entry : base)
    if (!top[entry.first.Scalar()]) out[entry.first.Scalar()] = YAML::Clone(entry.second);
  return out;
}

// One value of the given model_config that is no mapping: its key path and the mapping holding it alone.
struct GivenKey {
  std::string label;  // "moe_config.num_experts (line 40)"
  YAML::Node alone;
};

void collect_given_keys(const YAML::Node& node, const std::vector<std::string>& path, std::vector<GivenKey>& out) {
  for (const auto& entry : node) {
    std::vector<std::string> inner = path;
    inner.push_back(entry.first.Scalar());
    if (entry.second.IsMap() && entry.second.size() > 0) {
      collect_given_keys(entry.second, inner, out);
      continue;
    }
    YAML::Node alone = entry.second;
    for (auto key = inner.rbegin(); key != inner.rend(); ++key) {
      YAML::Node wrapper(YAML::NodeType::Map);
      wrapper[*key] = alone;
      alone = wrapper;
    }
    std::string label;
    for (const std::string& key : inner) label += (label.empty() ? "" : ".") + key;
    if (const YAML::Mark mark = entry.first.Mark(); !mark.is_null() && mark.line > 0)
      label += " (line " + std::to_string(mark.line + 1) + ")";
    out.push_back({label, alone});
  }
}

struct WeightConflict {
  std::string weight, folder_shape, given_shape;
};

std::string weight_label(const HfTensorRule& rule) {
  if (rule.hf_names.size() == 1) return rule.hf_names.front();
  std::string parts;
  for (const std::string& name : rule.hf_names) parts += (parts.empty() ? "" : ", ") + name;
  return rule.triax_name + " (" + parts + ")";
}

// The first weight whose shape differs between the folder's tensor map and the given one, or that
// only one of them has.
std::optional<WeightConflict> first_conflict(const std::vector<HfTensorRule>& folder,
                                             const std::vector<HfTensorRule>& given) {
  auto shapes = [](const std::vector<HfTensorRule>& rules) {
    std::map<std::string, const HfTensorRule*> out;
    for (const HfTensorRule& rule : rules)
      if (rule.kind != TRIAX_HF_IGNORE) out.emplace(rule.triax_name, &rule);
    return out;
  };
  const auto in_folder = shapes(folder), with_given = shapes(given);
  for (const HfTensorRule& rule : given) {
    if (rule.kind == TRIAX_HF_IGNORE) continue;
    const auto there = in_folder.find(rule.triax_name);
    if (there == in_folder.end()) return WeightConflict{weight_label(rule), "none", shape_text(rule.shape)};
    if (there->second->shape != rule.shape)
      return WeightConflict{weight_label(rule), shape_text(there->second->shape), shape_text(rule.shape)};
  }
  for (const auto& [name, rule] : in_folder)
    if (with_given.count(name) == 0) return WeightConflict{weight_label(*rule), shape_text(rule->shape), "none"};
  return std::nullopt;
}

// The given keys that alone change a weight (or are refused alone, so go with another of them);
// every given key when none does.
std::vector<std::string> keys_changing_weights(const TensorMapOf& tensor_map, const YAML::Node& translated,
                                               const YAML::Node& given, const std::vector<HfTensorRule>& folder_rules) {
  std::vector<GivenKey> keys;
  collect_given_keys(given, {}, keys);
  std::vector<std::string> culprits, all;
  for (const GivenKey& key : keys) {
    all.push_back(key.label);
    try {
      if (first_conflict(folder_rules, tensor_map(to_yaml_text(lay_over(translated, key.alone)))))
        culprits.push_back(key.label);
    } catch (const Error&) {
      culprits.push_back(key.label);
    }
  }
  return culprits.empty() ? all : culprits;
}

}  // namespace

YAML::Node overlay_hf_model_config(const TensorMapOf& tensor_map, const YAML::Node& translated, const YAML::Node& given,
                                   const std::string& origin, const std::string& folder) {
  if (!given.IsMap())
    throw ConfigError(origin + ": model.model_config: expected a mapping of keys to lay over the config.json of " +
                      folder);
  const YAML::Node merged = lay_over(translated, given);
  const std::vector<HfTensorRule> folder_rules = tensor_map(to_yaml_text(translated));
  const std::optional<WeightConflict> conflict =
      first_conflict(folder_rules, tensor_map(to_located_yaml_text(merged, origin)));
  if (!conflict) return merged;
  const std::vector<std::string> keys = keys_changing_weights(tensor_map, translated, given, folder_rules);
  std::string named;
  for (const std::string& key : keys) named += (named.empty() ? "model.model_config." : ", ") + key;
  throw ConfigError(origin + ": " + named + ": " + (keys.size() == 1 ? "contradicts" : "contradict") +
                    " the weights of the Hugging Face folder " + folder + ": " + conflict->weight + " is " +
                    conflict->folder_shape + " there and " + conflict->given_shape +
                    " with the keys given; leave out what changes the model's shape (the folder's config.json "
                    "supplies it)");
}

}  // namespace triax::interop
