#include "llama_init.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "triax/config_reader.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"

namespace triax::llama {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

InitMethod read_init_method(const YAML::Node& init_method, const LlamaConfig& config) {
  ConfigReader reader(init_method, "model.init_method");
  // `path` (weights from a checkpoint or a Hugging Face folder) is the host's: it copies them over
  // the random initialisation made here.
  reader.ignore("path");
  if (reader.contains("use_mup")) reader.fail("use_mup", "spectral muP initialisation is not implemented");
  reader.ignore("use_mup");
  InitMethod method;
  method.std = reader.get<double>("std", config.initializer_range);
  if (!(method.std >= 0.0)) reader.fail("std", "must not be negative, got " + std::to_string(method.std));
  std::string scaling = reader.get<std::string>("scaling_method", "NUM_LAYERS");
  std::transform(scaling.begin(), scaling.end(), scaling.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (scaling == "NUM_LAYERS") {
    method.output_std = method.std / std::sqrt(2.0 * static_cast<double>(config.num_hidden_layers));
  } else if (scaling == "NONE") {
    method.output_std = method.std;
  } else if (scaling == "LAYER_INDEX") {
    reader.fail("scaling_method", "LAYER_INDEX scaling is not implemented (accepted: NUM_LAYERS, NONE)");
  } else {
    reader.fail("scaling_method", "expected one of: NUM_LAYERS, NONE; got '" + scaling + "'");
  }
  reader.finish();
  return method;
}

void initialize_parameters(const std::vector<NamedParameter>& parameters, const InitMethod& method, uint64_t seed) {
  for (const NamedParameter& parameter : parameters) {
    const std::string& name = parameter.name;
    if (ends_with(name, "norm.weight")) {
      init_constant(parameter, 1.0);
    } else if (ends_with(name, ".bias")) {
      init_constant(parameter, 0.0);
    } else if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight")) {
      init_normal(parameter, method.output_std, seed);
    } else {
      init_normal(parameter, method.std, seed);
    }
  }
}

}  // namespace triax::llama
