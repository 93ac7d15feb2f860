// Between triax checkpoints and Hugging Face folders (triax convert), for any model plugin that has
// a Hugging Face mapping: the plugin translates config.json and gives its tensor map; interop/
// reads and writes the folder and applies the map; the core's checkpoint store reads and writes
// the checkpoint (a run starting from a Hugging Face folder reads it through
// triax/convert/hf_model_format.hpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "triax/core/plugins/plugin_registry.hpp"

namespace triax::checkpoint {

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

}  // namespace triax::checkpoint
