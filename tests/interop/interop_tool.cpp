// Test driver for the Python cross-checks (tests/interop/*.py): exposes triax's safetensors and
// Hugging Face folder functions as commands, with the build's model plugins. Not a user command.
//
//   interop_tool safetensors-describe FILE     JSON on stdout: metadata, and per tensor dtype, shape
//                                              and the FNV-1a hash of its bytes
//   interop_tool safetensors-generate FILE     writes the fixed tensors safetensors_compat.py expects
//   interop_tool hf-read FOLDER TENSORS YAML   read_hf_model (the plugin reading config.json's
//                                              architecture): weights to TENSORS (safetensors),
//                                              model_config to YAML, plugin and dtype on stdout
//   interop_tool hf-write TENSORS YAML FOLDER DTYPE MAX_SHARD_BYTES
//                                              write_hf_model of those weights and model_config,
//                                              with the plugin its marker key names
//   interop_tool checkpoint-tensors CHECKPOINT TENSORS
//                                              a triax checkpoint's whole parameters, as stored,
//                                              to TENSORS (safetensors)
//
// A triax::Error exits with status 1 and its message on stderr.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "triax/config_reader.hpp"
#include "triax/core/checkpoint/checkpoint_reader.hpp"
#include "triax/convert/hf_conversion.hpp"
#include "triax/convert/hf_weights.hpp"
#include "triax/core/plugins/model_selection.hpp"
#include "triax/error.hpp"
#include "triax/interop/safetensors.hpp"

namespace {

using Json = nlohmann::json;
using triax::interop::SafetensorsFile;

const triax::PluginRegistry& registry() {
  static triax::PluginRegistry* plugins = [] {
    auto* r = new triax::PluginRegistry();
    r->scan_folder(TRIAX_TEST_PLUGIN_DIR);
    return r;
  }();
  return *plugins;
}

std::string fnv1a(const at::Tensor& tensor) {
  const at::Tensor bytes = tensor.contiguous();
  const auto* p = static_cast<const unsigned char*>(bytes.data_ptr());
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < bytes.nbytes(); ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

int describe(const std::string& path) {
  SafetensorsFile file(path);
  Json out = {{"metadata", file.metadata()}, {"tensors", Json::object()}};
  for (const std::string& name : file.names()) {
    const at::Tensor tensor = file.read(name);
    out["tensors"][name] = {{"dtype", triax::interop::safetensors_dtype_name(file.dtype(name))},
                            {"shape", file.shape(name)},
                            {"fnv1a", fnv1a(tensor)}};
  }
  std::cout << out.dump() << "\n";
  return 0;
}

// safetensors_compat.py computes the same values with torch in Python.
int generate(const std::string& path) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  const std::vector<std::pair<std::string, at::ScalarType>> dtypes = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
      {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool}};
  for (const auto& [name, dtype] : dtypes) {
    at::Tensor values;
    if (dtype == at::kBool)
      values = at::arange(15, at::kLong).remainder(3).eq(0);
    else if (at::isFloatingType(dtype))
      values = (at::arange(15, at::kDouble) * 0.37 - 2.5).to(dtype);
    else
      values = (at::arange(15, at::kLong) * 37 - 100).to(dtype);
    tensors.push_back({"gen." + name, values.reshape({3, 5})});
  }
  tensors.push_back({"gen.scalar", at::scalar_tensor(7.25, at::kFloat)});
  tensors.push_back({"gen.empty", at::zeros({0, 3}, at::kBFloat16)});
  tensors.push_back({"gen.transposed", at::arange(6, at::kFloat).reshape({2, 3}).t()});
  const double inf = std::numeric_limits<double>::infinity();
  tensors.push_back(
      {"gen.bf16_special", at::tensor({std::nan(""), inf, -inf, -0.0, 1e-40, 3.14159}, at::kDouble).to(at::kBFloat16)});
  triax::interop::write_safetensors(path, tensors, {{"format", "pt"}, {"producer", "triax interop_tool"}});
  return 0;
}

at::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  throw triax::Error("unknown dtype " + name);
}

std::string dtype_name(at::ScalarType dtype) {
  if (dtype == at::kFloat) return "float32";
  if (dtype == at::kBFloat16) return "bfloat16";
  if (dtype == at::kHalf) return "float16";
  return c10::toString(dtype);
}

int hf_read(const std::string& folder, const std::string& tensors_path, const std::string& yaml_path) {
  triax::checkpoint::HfModel model = triax::checkpoint::read_hf_model(registry(), folder);
  std::vector<std::pair<std::string, at::Tensor>> tensors(model.parameters.begin(), model.parameters.end());
  triax::interop::write_safetensors(tensors_path, tensors);
  std::ofstream(yaml_path) << model.model_config_yaml;
  std::cout << Json({{"plugin", model.plugin}, {"dtype", dtype_name(model.dtype)}}).dump() << "\n";
  return 0;
}

int hf_write(const std::string& tensors_path, const std::string& yaml_path, const std::string& folder,
             const std::string& dtype, const std::string& max_shard_bytes) {
  SafetensorsFile file(tensors_path);
  std::map<std::string, at::Tensor> tensors;
  for (const std::string& name : file.names()) tensors[name] = file.read(name);
  const YAML::Node model_config = triax::load_yaml_file(yaml_path);
  const std::string plugin = triax::model_plugin_by_marker(registry(), model_config, yaml_path);
  triax::checkpoint::write_hf_model(registry(), plugin, triax::to_yaml_text(model_config), tensors, parse_dtype(dtype),
                                    std::stoll(max_shard_bytes), folder);
  return 0;
}

int checkpoint_tensors(const std::string& checkpoint, const std::string& tensors_path) {
  triax::checkpoint::CheckpointReader reader(checkpoint);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const std::string& name : reader.parameter_names()) tensors.emplace_back(name, reader.whole_parameter(name));
  triax::interop::write_safetensors(tensors_path, tensors);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 2 && args[0] == "safetensors-describe") return describe(args[1]);
    if (args.size() == 2 && args[0] == "safetensors-generate") return generate(args[1]);
    if (args.size() == 4 && args[0] == "hf-read") return hf_read(args[1], args[2], args[3]);
    if (args.size() == 6 && args[0] == "hf-write") return hf_write(args[1], args[2], args[3], args[4], args[5]);
    if (args.size() == 3 && args[0] == "checkpoint-tensors") return checkpoint_tensors(args[1], args[2]);
  } catch (const triax::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: interop_tool safetensors-describe FILE | safetensors-generate FILE |\n"
               "       hf-read FOLDER TENSORS YAML | hf-write TENSORS YAML FOLDER DTYPE MAX_SHARD_BYTES |\n"
               "       checkpoint-tensors CHECKPOINT TENSORS\n";
  return 2;
}
