#include "triax/core/checkpoint/hf_conversion.hpp"

#include <ATen/ATen.h>

#include <filesystem>

#include "triax/config_reader.hpp"
#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "triax/core/checkpoint/checkpoint_reader.hpp"
#include "checkpoint/checkpoint_writer.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/hf_llama.hpp"
#include "triax/torch_version.hpp"
#include "triax/tensor_text.hpp"

namespace triax::checkpoint {
namespace {

namespace fs = std::filesystem;

// The checkpoint's parameter dtype, when Hugging Face weights can be written in it.
at::ScalarType exportable_dtype(const std::string& name, const std::string& origin) {
  const std::optional<at::ScalarType> type = dtype_from_name(name);
  if (!type || (*type != at::kFloat && *type != at::kBFloat16 && *type != at::kHalf))
    throw CheckpointError(origin + ": dtype '" + name + "' cannot be exported (float32, bfloat16 or float16)");
  return *type;
}


}  // namespace

bool is_hf_folder(const std::string& path) {
  const fs::path folder(path);
  return fs::exists(folder / "config.json") &&
         (fs::exists(folder / "model.safetensors") || fs::exists(folder / "model.safetensors.index.json") ||
          fs::exists(folder / "pytorch_model.bin"));
}

void export_to_hf(const std::string& checkpoint, const std::string& out, std::optional<at::ScalarType> dtype,
                  int64_t max_shard_bytes) {
  CheckpointReader reader(checkpoint);
  const CheckpointMetadata& m = reader.metadata();
  if (m.model_plugin != "llama")
    throw CheckpointError("checkpoint " + reader.folder().string() + " holds a '" + m.model_plugin +
                          "' model; only llama exports to Hugging Face (LlamaForCausalLM)");
  const YAML::Node config = YAML::Load(reader.resolved_config());
  const YAML::Node model_config = config["model"]["model_config"];
  if (!model_config.IsMap())
    throw CheckpointError("checkpoint " + reader.folder().string() + ": " + kConfigFile + " has no model.model_config");
  std::map<std::string, at::Tensor> tensors;
  for (const std::string& name : reader.parameter_names()) tensors[name] = reader.whole_parameter(name);
  write_hf_llama(out, model_config, tensors, dtype.value_or(exportable_dtype(m.model_dtype, reader.folder().string())),
                 max_shard_bytes);
}

std::string import_from_hf(const std::string& hf_folder, const std::string& out) {
  HfLlamaModel model = read_hf_llama(hf_folder);
  // The tensors as one rank's whole parameters.
  std::vector<NamedParameter> parameters;
  for (auto& [name, tensor] : model.tensors) {
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
  m.model_plugin = "llama";
  m.model_dtype = dtype_name(model.dtype);
  m.optimizer_plugin = "none";
  m.has_optimizer_state = false;
  m.triax_version = TRIAX_VERSION;
  m.torch_version = TRIAX_TORCH_VERSION_STRING;
  m.saved_at = "imported from " + fs::absolute(hf_folder).string();
  m.files = {rank_file_name(0)};

  YAML::Node config;
  config["model"]["plugin"] = "llama";
  config["model"]["dtype"] = m.model_dtype;
  config["model"]["model_config"] = model.model_config;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw CheckpointError("cannot create " + out + ": " + ec.message());
  SingleProcessCommunicator alone;
  CheckpointWriter writer(out, 0, alone);
  writer.save(m, contents, to_yaml_text(config));
  return (fs::path(out) / step_folder_name(0)).string();
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
