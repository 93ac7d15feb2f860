// A Hugging Face folder's weights as a training run starts from them (model.init_method.path), for
// any model plugin that has a Hugging Face mapping: the plugin translates config.json and gives
// its tensor map; interop/ reads the folder and applies the map. The run reaches them through
// triax/convert/hf_model_format.hpp; conversion both ways (triax convert) is
// triax/convert/hf_conversion.hpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
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

// Copies the part of `whole` (the meaningful, unpadded tensor) that `target`'s shard covers into
// it; padding stays zero. A shape mismatch is an error naming `origin` and the tensor.
void copy_shard_from_whole(const NamedParameter& target, const at::Tensor& whole, const std::string& origin);

}  // namespace triax::checkpoint
