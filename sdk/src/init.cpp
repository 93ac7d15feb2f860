#include "triax/init.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "triax/config_reader.hpp"
#include "triax/glob_match.hpp"
#include "triax/spectral_mup.hpp"

namespace triax {

uint64_t parameter_seed(uint64_t seed, const std::string& name) {
  // FNV-1a over the name, mixed with the run seed (splitmix64 finaliser).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  uint64_t z = h ^ (seed + 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void init_global(const NamedParameter& parameter, uint64_t seed,
                 const std::function<void(at::Tensor& global, at::Generator& generator)>& fill) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(parameter_seed(seed, parameter.name));
  at::Tensor global = at::empty(parameter.spec.global_shape, at::TensorOptions().dtype(at::kFloat));
  fill(global, generator);
  at::Tensor shard = global;
  for (size_t dim = 0; dim < parameter.spec.global_shape.size(); ++dim)
    shard = shard.narrow(static_cast<int64_t>(dim), parameter.spec.shard_offset[dim], parameter.tensor.size(dim));
  at::NoGradGuard no_grad;
  parameter.tensor.copy_(shard);
}

void init_normal(const NamedParameter& parameter, double std, uint64_t seed) {
  init_global(parameter, seed, [std](at::Tensor& global, at::Generator& generator) { global.normal_(0.0, std, generator); });
}

void init_uniform(const NamedParameter& parameter, double low, double high, uint64_t seed) {
  init_global(parameter, seed,
              [low, high](at::Tensor& global, at::Generator& generator) { global.uniform_(low, high, generator); });
}

void init_constant(const NamedParameter& parameter, double value) {
  at::NoGradGuard no_grad;
  parameter.tensor.fill_(value);
}

ScaledInitMethod read_scaled_init_method(const YAML::Node& init_method, double default_std, int64_t num_layers) {
  ConfigReader reader(init_method, "model.init_method");
  // `path` (weights from a checkpoint or a Hugging Face folder) is the host's: it copies them over
  // the random initialisation made here.
  reader.ignore("path");
  ScaledInitMethod method;
  method.use_mup = reader.get<bool>("use_mup", false);
  if (method.use_mup) {
    // nanotron's SpectralMupInit has use_mup alone: every scale follows from the fans.
    for (const char* key : {"std", "scaling_method"})
      if (reader.contains(key)) reader.fail(key, "does not apply with use_mup: true (spectral muP sets every scale)");
    reader.finish();
    return method;
  }
  method.std = reader.get<double>("std", default_std);
  if (!(method.std >= 0.0)) reader.fail("std", "must not be negative, got " + std::to_string(method.std));
  std::string scaling = reader.get<std::string>("scaling_method", "NUM_LAYERS");
  std::transform(scaling.begin(), scaling.end(), scaling.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (scaling == "NUM_LAYERS") {
    method.output_std = method.std / std::sqrt(2.0 * static_cast<double>(num_layers));
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

void init_scaled(std::vector<NamedParameter>& parameters, const ScaledInitMethod& method, uint64_t seed,
                 const std::vector<std::string>& output_projections, const std::vector<std::string>& norm_weights) {
  if (method.use_mup) {
    init_spectral_mup(parameters, seed);
    return;
  }
  auto ends_with_any = [](const std::string& name, const std::vector<std::string>& suffixes) {
    return std::any_of(suffixes.begin(), suffixes.end(), [&](const std::string& suffix) { return ends_with(name, suffix); });
  };
  for (const NamedParameter& parameter : parameters) {
    const std::string& name = parameter.name;
    if (ends_with_any(name, norm_weights)) {
      init_constant(parameter, 1.0);
    } else if (ends_with(name, ".bias")) {
      init_constant(parameter, 0.0);
    } else if (ends_with_any(name, output_projections)) {
      init_normal(parameter, method.output_std, seed);
    } else {
      init_normal(parameter, method.std, seed);
    }
  }
}

}  // namespace triax
