// Between triax checkpoints and Hugging Face folders (triax convert, model.init_method.path), for
// any model plugin that has a Hugging Face mapping: the plugin translates config.json and gives
// its tensor map; interop/ reads and writes the folder and applies the map.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/parameter.hpp"

namespace triax::checkpoint {

// A model read from a Hugging Face folder.
struct HfModel {
  std::string plugin;                            // the model plugin that reads its architecture
  std::string model_config_yaml;                 // its config.json as that plugin's model_config
  std::map<std::string, at::Tensor> parameters;  // whole, on the CPU, as stored
  at::ScalarType dtype;                          // the weights' dtype
};

// Reads `folder` with the plugin whose architectures list config.json's (or `plugin`, when given).
HfModel read_hf_model(const PluginRegistry& registry, const std::string& folder, const std::string& plugin = "");

// Writes whole `parameters` of a `plugin` model described by model_config as a Hugging Face folder
// in `dtype` (float32, bfloat16 or float16), sharded above `max_shard_bytes`.
void write_hf_model(const PluginRegistry& registry, const std::string& plugin, const std::string& model_config_yaml,
                    const std::map<std::string, at::Tensor>& parameters, at::ScalarType dtype, int64_t max_shard_bytes,
                    const std::string& folder);

// Writes the model of `checkpoint` (a step folder, or a folder with `latest`) as a Hugging Face
// folder with the mapping of the plugin its metadata names: weights in `dtype` (default: the
// checkpoint's parameter dtype).
void export_to_hf(const PluginRegistry& registry, const std::string& checkpoint, const std::string& out,
                  std::optional<at::ScalarType> dtype, int64_t max_shard_bytes);

// Writes a Hugging Face folder as a triax checkpoint folder `out` (step_00000000 and `latest`):
// weights only, single-rank topology, for model.init_method.path (any topology). Returns the step
// folder written.
std::string import_from_hf(const PluginRegistry& registry, const std::string& hf_folder, const std::string& out);

// Copies the part of `whole` (the meaningful, unpadded tensor) that `target`'s shard covers into
// it; padding stays zero. A shape mismatch is an error naming `origin` and the tensor.
void copy_shard_from_whole(const NamedParameter& target, const at::Tensor& whole, const std::string& origin);

}  // namespace triax::checkpoint
