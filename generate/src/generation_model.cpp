#include "triax/generate/generation_model.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "triax/config_reader.hpp"
#include "triax/convert/hf_model_format.hpp"
#include "triax/convert/model_hf_mapping.hpp"
#include "triax/core/checkpoint/checkpoint_reader.hpp"
#include "triax/core/checkpoint/training_checkpoint.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_contexts.hpp"
#include "triax/core/plugins/model_selection.hpp"
#include "triax/error.hpp"
#include "triax/interop/hf_folder.hpp"
#include "triax/tensor_text.hpp"

namespace triax::generation {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
constexpr const char* kTokenizerFile = "tokenizer.json";

// eos_token_id of a config.json / generation_config.json: a number, a list of them, or absent.
std::vector<int64_t> eos_of(const Json& json) {
  std::vector<int64_t> out;
  if (!json.is_object() || !json.contains("eos_token_id")) return out;
  const Json& eos = json["eos_token_id"];
  if (eos.is_number_integer()) out.push_back(eos.get<int64_t>());
  if (eos.is_array())
    for (const Json& id : eos)
      if (id.is_number_integer()) out.push_back(id.get<int64_t>());
  return out;
}

std::optional<Json> read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  try {
    return Json::parse(text.str());
  } catch (const Json::exception& e) {
    throw Error(file.string() + ": not valid JSON: " + e.what());
  }
}

// node[key], or an undefined node where `node` is no mapping holding `key`. yaml-cpp throws when a
// missing key's node is indexed again, and a checkpoint made by `triax convert --from hf` has a
// config.yaml with a model section only.
YAML::Node child(const YAML::Node& node, const std::string& key) {
  if (!node.IsMap() || !node[key]) return YAML::Node(YAML::NodeType::Undefined);
  return node[key];
}

// A config's tokenizer.tokenizer_name_or_path (a file or a folder holding tokenizer.json), then
// the folders its data stages read (tools/tokenize writes the tokenizer beside the tokens).
void add_config_tokenizers(const YAML::Node& config, std::vector<std::string>& candidates) {
  if (!config.IsMap()) return;
  if (const YAML::Node named = child(child(config, "tokenizer"), "tokenizer_name_or_path"); named && named.IsScalar()) {
    const fs::path path = named.as<std::string>();
    candidates.push_back((fs::is_directory(path) ? path / kTokenizerFile : path).string());
  }
  if (const YAML::Node stages = config["data_stages"]; stages && stages.IsSequence())
    for (const YAML::Node& stage : stages) {
      const YAML::Node folders = child(child(child(stage, "data"), "dataset"), "dataset_folder");
      if (!folders) continue;
      if (folders.IsScalar()) candidates.push_back((fs::path(folders.as<std::string>()) / kTokenizerFile).string());
      if (folders.IsSequence())
        for (const YAML::Node& folder : folders)
          if (folder.IsScalar()) candidates.push_back((fs::path(folder.as<std::string>()) / kTokenizerFile).string());
    }
}

// The end-of-text ids a model_config states, through the plugin's Hugging Face translation
// (the generation_config.json an export would write); none for a plugin without a mapping.
void add_plugin_eos(const PluginRegistry& registry, GenerationModelSpec& spec) {
  if (!registry.model(spec.plugin).hf) return;
  try {
    const ModelHfMapping mapping(registry, spec.plugin);
    const auto [config_json, generation_json] = mapping.config_to_hf(spec.model_config_yaml, "float32");
    spec.eos = eos_of(Json::parse(generation_json));
    spec.eos_origin = "model.model_config, as " + model_plugin_label(spec.plugin) + " reads it";
  } catch (const PluginError&) {
  }
}

GenerationModelSpec spec_from_hf_folder(const PluginRegistry& registry, const std::string& folder) {
  GenerationModelSpec spec;
  spec.origin = "Hugging Face folder " + folder;
  const std::string config_json = interop::read_hf_config(folder);
  const std::string config_path = (fs::path(folder) / interop::kHfConfigFile).string();
  spec.plugin = model_plugin_by_architecture(registry, config_json, config_path);
  spec.model_config_yaml = ModelHfMapping(registry, spec.plugin).config_from_hf(config_json, config_path);
  spec.weights = folder;
  const std::optional<at::ScalarType> dtype = interop::hf_declared_dtype(config_json);
  spec.dtype = dtype ? dtype_name(*dtype) : "float32";
  spec.tokenizer_candidates.push_back((fs::path(folder) / kTokenizerFile).string());
  // transformers' order: generation_config.json, then config.json.
  const fs::path generation_config = fs::path(folder) / "generation_config.json";
  if (std::optional<Json> generation = read_json(generation_config); generation && !eos_of(*generation).empty()) {
    spec.eos = eos_of(*generation);
    spec.eos_origin = generation_config.string();
  } else {
    spec.eos = eos_of(Json::parse(config_json));
    spec.eos_origin = config_path;
  }
  spec.eos_stated = !spec.eos.empty();
  return spec;
}

GenerationModelSpec spec_from_checkpoint(const PluginRegistry& registry, const std::string& path) {
  const checkpoint::CheckpointReader reader(path);
  const YAML::Node config = YAML::Load(reader.resolved_config());
  const YAML::Node model = config["model"];
  if (!model.IsMap() || !model["model_config"].IsMap())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "checkpoint " + reader.folder().string() + ": its config.yaml has no model.model_config");
  GenerationModelSpec spec;
  spec.origin = "checkpoint " + reader.folder().string();
  spec.plugin = reader.metadata().model_plugin;
  registry.model(spec.plugin);  // an unknown plugin lists the available ones
  spec.model_config_yaml = to_yaml_text(model["model_config"]);
  spec.weights = reader.folder().string();
  spec.dtype = reader.metadata().model_dtype;
  if (model["make_vocab_size_divisible_by"])
    spec.make_vocab_size_divisible_by = model["make_vocab_size_divisible_by"].as<int64_t>();
  if (const YAML::Node seed = child(child(config, "general"), "seed"); seed && seed.IsScalar())
    spec.seed = seed.as<uint64_t>();
  spec.tokenizer_candidates.push_back((reader.folder() / kTokenizerFile).string());
  spec.tokenizer_candidates.push_back((reader.folder().parent_path() / kTokenizerFile).string());
  add_config_tokenizers(config, spec.tokenizer_candidates);
  add_plugin_eos(registry, spec);
  return spec;
}

}  // namespace

GenerationModelSpec spec_from_folder(const PluginRegistry& registry, const std::string& path) {
  if (!fs::is_directory(path))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, path +
                                                  ": no such folder (expected a triax checkpoint or a Hugging Face "
                                                  "folder)");
  if (interop::is_hf_folder(path)) return spec_from_hf_folder(registry, path);
  return spec_from_checkpoint(registry, path);
}

GenerationModelSpec spec_from_config(const PluginRegistry& registry, TrainConfig config) {
  const HfModelFormat hf_folders;
  resolve_model_section(config, registry, &hf_folders);
  GenerationModelSpec spec;
  spec.origin = config.origin;
  spec.plugin = config.model.plugin;
  spec.model_config_yaml = to_yaml_text(config.model.model_config);
  YAML::Node init_method = YAML::Clone(config.model.init_method);
  if (init_method.IsMap() && init_method["path"]) {
    spec.weights = init_method["path"].as<std::string>();
    init_method.remove("path");
    if (interop::is_hf_folder(spec.weights))
      spec.tokenizer_candidates.push_back((fs::path(spec.weights) / kTokenizerFile).string());
  }
  if (init_method.IsDefined() && !init_method.IsNull()) spec.init_method_yaml = to_yaml_text(init_method);
  spec.dtype = config.model.dtype;
  spec.make_vocab_size_divisible_by = config.model.make_vocab_size_divisible_by;
  spec.seed = static_cast<uint64_t>(config.general.seed);
  spec.device = config.general.device;
  add_config_tokenizers(config.resolved, spec.tokenizer_candidates);
  add_plugin_eos(registry, spec);
  return spec;
}

std::optional<std::string> find_tokenizer(const GenerationModelSpec& spec) {
  for (const std::string& candidate : spec.tokenizer_candidates)
    if (fs::is_regular_file(candidate)) return candidate;
  return std::nullopt;
}

std::unique_ptr<ModelInstance> create_generation_model(const PluginRegistry& registry, const GenerationModelSpec& spec,
                                                       Communicator& communicator, const HostServices& host,
                                                       const c10::Device& device, const std::string& dtype) {
  const triax_model_vtable& vtable = registry.model(spec.plugin);
  const std::vector<double> blocks =
      ModelInstance::describe_blocks(vtable, spec.plugin, spec.model_config_yaml, /*sequence_length=*/1);
  const std::string device_name = device.str();
  triax_model_context context = mesh_model_context(communicator);
  context.pp_rank = 0;  // every rank holds all blocks: generation splits over tp only
  context.pp_size = 1;
  context.first_block = 0;
  context.last_block = static_cast<int32_t>(blocks.size());
  context.chunk_index = 0;
  context.chunk_count = 1;
  context.virtual_stage = 0;
  context.virtual_stage_count = 1;
  context.device = device_name.c_str();
  context.dtype = dtype.c_str();
  context.seed = spec.seed;
  context.init_method_yaml = spec.init_method_yaml.c_str();
  context.tp_mode = 0;  // ALL_REDUCE: a decoding step's one token per row needs no sequence split
  context.make_vocab_size_divisible_by = spec.make_vocab_size_divisible_by;
  context.host = host.c_host();
  auto model = std::make_unique<ModelInstance>(vtable, spec.plugin, spec.model_config_yaml, context);
  if (!spec.weights.empty()) {
    const HfModelFormat hf_folders;
    checkpoint::load_initial_weights(spec.weights, model->parameters(), communicator, device, registry, spec.plugin,
                                     &hf_folders);
  }
  model->set_training(false);
  return model;
}

}  // namespace triax::generation
