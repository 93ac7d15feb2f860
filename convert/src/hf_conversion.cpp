#include "triax/convert/hf_conversion.hpp"

#include <ATen/ATen.h>

#include <filesystem>
#include <tuple>

#include "triax/config_reader.hpp"
#include "triax/convert/hf_weights.hpp"
#include "triax/convert/model_hf_mapping.hpp"
#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "triax/core/checkpoint/checkpoint_reader.hpp"
#include "triax/core/checkpoint/checkpoint_writer.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/interop/hf_folder.hpp"
#include "triax/interop/tensor_map.hpp"
#include "triax/report/progress.hpp"
#include "triax/tensor_text.hpp"
#include "triax/torch_version.hpp"

namespace triax::checkpoint {
namespace fs = std::filesystem;

void write_hf_model(const PluginRegistry& registry, const std::string& plugin, const std::string& model_config_yaml,
                    const std::map<std::string, at::Tensor>& parameters, at::ScalarType dtype, int64_t max_shard_bytes,
                    const std::string& folder) {
  if (!interop::is_hf_weight_dtype(dtype))
    throw Error(folder + ": cannot export weights as " + c10::toString(dtype) +
                " (expected float32, bfloat16 or float16)");
  const ModelHfMapping mapping(registry, plugin);
  const interop::TensorMap map(mapping.tensor_map(model_config_yaml), model_plugin_label(plugin));
  interop::TensorMap::Tensors tensors = map.write(parameters, dtype, folder);
  interop::HfFolderContents contents;
  std::tie(contents.config_json, contents.generation_config_json) =
      mapping.config_to_hf(model_config_yaml, dtype_name(dtype));
  contents.tensors = std::move(tensors.entries);
  contents.tensor_of = std::move(tensors.tensor_of);
  contents.max_shard_bytes = max_shard_bytes;
  interop::write_hf_folder(folder, contents);
}

void export_to_hf(const PluginRegistry& registry, const std::string& checkpoint, const std::string& out,
                  std::optional<at::ScalarType> dtype, int64_t max_shard_bytes) {
  CheckpointReader reader(checkpoint);
  const CheckpointMetadata& m = reader.metadata();
  const YAML::Node config = YAML::Load(reader.resolved_config());
  const YAML::Node model_config = config["model"]["model_config"];
  if (!model_config.IsMap())
    throw CheckpointError("checkpoint " + reader.folder().string() + ": " + kConfigFile + " has no model.model_config");
  if (!dtype) {
    dtype = dtype_from_name(m.model_dtype);
    if (!dtype || !interop::is_hf_weight_dtype(*dtype))
      throw CheckpointError(reader.folder().string() + ": dtype '" + m.model_dtype +
                            "' cannot be exported (float32, bfloat16 or float16)");
  }
  std::map<std::string, at::Tensor> tensors;
  int64_t total_bytes = 0;
  for (const std::string& name : reader.parameter_names()) {
    const std::optional<at::ScalarType> stored = dtype_from_name(reader.parameter_dtype(name));
    int64_t elements = 1;
    for (const int64_t size : reader.parameter_shape(name)) elements *= size;
    total_bytes += elements * static_cast<int64_t>(c10::elementSize(stored.value_or(at::kFloat)));
  }
  ProgressMeter progress("reading " + reader.folder().string(), total_bytes);
  for (const std::string& name : reader.parameter_names()) {
    tensors[name] = reader.whole_parameter(name);
    progress.advance(static_cast<int64_t>(tensors[name].nbytes()));
  }
  progress.finish();
  write_hf_model(registry, m.model_plugin, to_yaml_text(model_config), tensors, *dtype, max_shard_bytes, out);
}

std::string import_from_hf(const PluginRegistry& registry, const std::string& hf_folder, const std::string& out) {
  ProgressMeter progress("reading " + hf_folder, 0);  // the size is known once read: its total and rate
  HfModel model = read_hf_model(registry, hf_folder);
  for (const auto& [name, tensor] : model.parameters) progress.advance(static_cast<int64_t>(tensor.nbytes()));
  progress.finish();
  // The tensors as one rank's whole parameters.
  std::vector<NamedParameter> parameters;
  for (auto& [name, tensor] : model.parameters) {
    NamedParameter p;
    p.name = name;
    p.tensor = tensor.contiguous();
    p.spec.global_shape = tensor.sizes().vec();
    p.spec.shard_offset.assign(tensor.dim(), 0);
    parameters.push_back(std::move(p));
  }
  RankContents contents;
  for (const NamedParameter& p : parameters) contents.parameters.push_back(&p);

  CheckpointMetadata m;
  m.step = 0;
  m.model_plugin = model.plugin;
  m.model_dtype = dtype_name(model.dtype);
  m.optimizer_plugin = "none";
  m.has_optimizer_state = false;
  m.triax_version = TRIAX_VERSION;
  m.torch_version = TRIAX_TORCH_VERSION_STRING;
  m.saved_at = "imported from " + fs::absolute(hf_folder).string();
  m.files = {rank_file_name(0)};

  YAML::Node config;
  config["model"]["plugin"] = model.plugin;
  config["model"]["dtype"] = m.model_dtype;
  config["model"]["model_config"] = YAML::Load(model.model_config_yaml);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw CheckpointError("cannot create " + out + ": " + ec.message());
  SingleProcessCommunicator alone;
  CheckpointWriter writer(out, alone);
  writer.save(m, contents, to_yaml_text(config));
  prune_checkpoints(out, 0, 0);  // what an interrupted import left
  return (fs::path(out) / step_folder_name(0)).string();
}

}  // namespace triax::checkpoint
