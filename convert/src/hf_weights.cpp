#include "triax/convert/hf_weights.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "triax/convert/model_hf_mapping.hpp"
#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/interop/hf_folder.hpp"
#include "triax/interop/tensor_map.hpp"
#include "triax/tensor_text.hpp"

namespace triax::checkpoint {
namespace fs = std::filesystem;

HfModel read_hf_model(const PluginRegistry& registry, const std::string& folder, const std::string& plugin) {
  const std::string config_json = interop::read_hf_config(folder);
  const std::string config_path = (fs::path(folder) / interop::kHfConfigFile).string();
  HfModel model;
  model.plugin = plugin.empty() ? model_plugin_by_architecture(registry, config_json, config_path) : plugin;
  const ModelHfMapping mapping(registry, model.plugin);
  model.model_config_yaml = mapping.config_from_hf(config_json, config_path);
  const interop::TensorMap map(mapping.tensor_map(model.model_config_yaml), model_plugin_label(model.plugin));
  interop::TensorMap::Weights weights =
      map.read(interop::HfWeights(folder), config_path, interop::hf_declared_dtype(config_json));
  model.parameters = std::move(weights.parameters);
  model.dtype = weights.dtype;
  return model;
}

void copy_shard_from_whole(const NamedParameter& target, const at::Tensor& whole, const std::string& origin) {
  const std::vector<int64_t>& expected = target.spec.meaningful_shape();
  if (whole.sizes().vec() != expected)
    throw CheckpointError(origin + ": tensor " + target.name + " has shape " + shape_text(whole.sizes()) +
                          ", but this model's is " + shape_text(expected) + " (another model shape?)");
  at::Tensor shard = at::zeros(target.tensor.sizes(), whole.options());
  at::Tensor source = whole, destination = shard;
  for (int64_t d = 0; d < shard.dim(); ++d) {
    const int64_t begin = target.spec.shard_offset[static_cast<size_t>(d)];
    const int64_t count = std::clamp<int64_t>(expected[static_cast<size_t>(d)] - begin, 0, shard.size(d));
    source = source.narrow(d, std::min(begin, whole.size(d)), count);
    destination = destination.narrow(d, 0, count);
  }
  destination.copy_(source);
  at::NoGradGuard no_grad;
  target.tensor.detach().copy_(shard);
}

}  // namespace triax::checkpoint
