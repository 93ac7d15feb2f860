#include <yaml-cpp/yaml.h>

#include <cctype>

#include "reference_tables.hpp"
#include "triax/config/train_config.hpp"
#include "triax/data/nanoset_config.hpp"
#include "triax/error.hpp"

namespace triax::config_reference {
namespace {

constexpr const char* kRequiredOnly = R"(
model:
  model_config: {}
  init_method: {std: 0.02}
tokens: {sequence_length: 16, train_steps: 10, micro_batch_size: 1, batch_accumulation_per_replica: 1}
optimizer:
  learning_rate_scheduler: {learning_rate: 0.001}
)";

constexpr const char* kEverySection = R"(
checkpoints: {checkpoints_path: probe_run}
profiler: {profiler_export_path: probe_traces}
fp8: {}
data_stages:
  - {name: synthetic, start_training_step: 1, data: {}}
  - {name: folders, start_training_step: 5, data: {dataset: {dataset_folder: probe_tokens}}}
)";

bool is_index(const std::string& part) { return !part.empty() && std::isdigit(static_cast<unsigned char>(part[0])); }

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Through `parts` from `node`; "[]" tries each item in turn. The last part need not be present.
std::optional<std::vector<std::string>> locate_from(const YAML::Node& node, const std::vector<std::string>& parts,
                                                    size_t at) {
  if (at + 1 == parts.size()) return node.IsMap() ? std::optional(std::vector<std::string>{parts[at]}) : std::nullopt;
  std::string part = parts[at];
  const bool list = part.size() > 2 && part.compare(part.size() - 2, 2, "[]") == 0;
  if (list) part.resize(part.size() - 2);
  if (!node.IsMap() || !node[part]) return std::nullopt;
  const YAML::Node child = node[part];
  if (!list) {
    std::optional<std::vector<std::string>> rest = locate_from(child, parts, at + 1);
    if (rest) rest->insert(rest->begin(), part);
    return rest;
  }
  if (!child.IsSequence()) return std::nullopt;
  for (size_t i = 0; i < child.size(); ++i) {
    std::optional<std::vector<std::string>> rest = locate_from(child[i], parts, at + 1);
    if (!rest) continue;
    rest->insert(rest->begin(), std::to_string(i));
    rest->insert(rest->begin(), part);
    return rest;
  }
  return std::nullopt;
}

}  // namespace

std::string full_path(const Section& section, const Key& key) {
  return section.path.empty() ? key.name : section.path + "." + key.name;
}

std::optional<std::vector<std::string>> locate(const YAML::Node& document, const std::string& full) {
  return locate_from(document, split(full), 0);
}

namespace {

// Recursive, never assigning a node: yaml-cpp's assignment writes into the tree.
YAML::Node node_at_from(const YAML::Node& node, const std::vector<std::string>& path, size_t at) {
  if (at == path.size()) return node;
  const std::string& part = path[at];
  if (is_index(part)) {
    if (!node.IsSequence() || std::stoul(part) >= node.size()) return YAML::Node(YAML::NodeType::Undefined);
    return node_at_from(node[std::stoul(part)], path, at + 1);
  }
  if (!node.IsMap() || !node[part]) return YAML::Node(YAML::NodeType::Undefined);
  return node_at_from(node[part], path, at + 1);
}

}  // namespace

YAML::Node node_at(const YAML::Node& document, const std::vector<std::string>& path) {
  return node_at_from(document, path, 0);
}

std::string path_text(const std::vector<std::string>& path) {
  std::string text;
  for (const std::string& part : path) text += (text.empty() ? "" : ".") + part;
  return text;
}

LoaderResult run_loader(const YAML::Node& input) {
  LoaderResult result;
  try {
    TrainConfig config = parse_train_config(YAML::Clone(input), "probe.yaml");
    YAML::Node resolved = config.resolved;
    // Token folders are read by the data loader at run start; its reader records them the same way.
    for (size_t i = 0; i < config.data_stages.size(); ++i) {
      const YAML::Node& dataset = config.data_stages[i].data.dataset;
      if (!dataset.IsDefined() || dataset.IsNull()) continue;
      const std::string key_path = "data_stages." + std::to_string(i) + ".data.dataset";
      resolved["data_stages"][i]["data"]["dataset"] =
          data::parse_nanoset_config(dataset, key_path, "probe.yaml").resolved;
    }
    result.resolved = resolved;
  } catch (const ConfigError& e) {
    result.error = e.what();
  }
  return result;
}

const std::vector<Probe>& probes() {
  static const std::vector<Probe> all = [] {
    YAML::Node required_only = YAML::Load(kRequiredOnly);
    YAML::Node every_section = YAML::Clone(required_only);
    for (const auto& entry : YAML::Load(kEverySection)) every_section[entry.first.Scalar()] = entry.second;
    std::vector<Probe> out;
    for (const YAML::Node& input : {required_only, every_section}) {
      LoaderResult result = run_loader(input);
      if (!result.resolved)
        throw Error(TRIAX_ERROR_RUNTIME, "the config reference's probe is refused: " + result.error);
      out.push_back({input, *result.resolved});
    }
    return out;
  }();
  return all;
}

}  // namespace triax::config_reference
