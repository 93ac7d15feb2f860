// model_config keys given beside a Hugging Face folder (model.init_method.path): they are laid
// over the model_config that the folder's config.json translates to, so that a config adding one
// key (`--set model.model_config._use_doc_masking=true`) keeps the folder's shape instead of the
// plugin's defaults. A key that changes a weight's shape from the folder's is refused.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

#include "triax/hf_mapping.hpp"

namespace triax::interop {

// A model plugin's tensor map for a model_config given as YAML text (its HF mapping through the ABI).
using TensorMapOf = std::function<std::vector<HfTensorRule>(const std::string& model_yaml)>;

// `given` laid over `translated` (a key whose values are mappings on both sides is merged key by
// key; any other value of `given` replaces the folder's). The values given keep their place in the
// config file; the folder's have none. A given key with which the model's tensor map (`tensor_map`) makes a
// weight of another shape than the folder's, or one the folder lacks, is a ConfigError naming
// `origin`, the key, the weight and both shapes.
YAML::Node overlay_hf_model_config(const TensorMapOf& tensor_map, const YAML::Node& translated, const YAML::Node& given,
                                   const std::string& origin, const std::string& folder);

}  // namespace triax::interop
