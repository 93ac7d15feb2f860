// Parameter initialisation that does not depend on the topology: each parameter's *global*
// values come from a generator seeded by (seed, parameter name), and each rank keeps its shard.
// A model initialised at tp=2, pp=2 therefore holds exactly the values of the tp=1, pp=1 model.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "triax/parameter.hpp"

namespace triax {

// Deterministic 64-bit seed for one parameter.
uint64_t parameter_seed(uint64_t seed, const std::string& name);

// `fill` writes the whole parameter (fp32, its global shape) from a generator seeded by (seed,
// parameter name); this rank's shard is copied into the parameter.
void init_global(const NamedParameter& parameter, uint64_t seed,
                 const std::function<void(at::Tensor& global, at::Generator& generator)>& fill);
// Normal(0, std) over the global shape, this rank's shard copied into the parameter.
void init_normal(const NamedParameter& parameter, double std, uint64_t seed);
// Uniform on [low, high) over the global shape, likewise.
void init_uniform(const NamedParameter& parameter, double low, double high, uint64_t seed);
void init_constant(const NamedParameter& parameter, double value);

// model.init_method of a decoder-only model, as nanotron reads it:
//   {std: s}           every linear and embedding weight ~ N(0, s); the output projections ~
//                      N(0, s / sqrt(2 * num_layers)) (nanotron's scaled init). Without std,
//                      s = default_std (the model's initializer_range).
//   scaling_method     NUM_LAYERS (default, as above) or NONE (no scaling).
//   path               weights to load: the host's business, accepted and ignored here.
//   use_mup: true      spectral muP instead (triax/spectral_mup.hpp); std and scaling_method
//                      do not apply then. Only for models that declare kSupportsMup (plugin.hpp).
struct ScaledInitMethod {
  double std = 0.02;
  double output_std = 0.02;  // the output projections
  bool use_mup = false;
};

// Reads model.init_method strictly (ConfigError naming model.init_method.<key>).
ScaledInitMethod read_scaled_init_method(const YAML::Node& init_method, double default_std, int64_t num_layers);

// Norm weights (names ending in one of norm_weights) 1, biases 0, weights whose names end in one
// of output_projections N(0, output_std), every other parameter N(0, std). With use_mup, the
// spectral muP initialisation, which also sets each parameter's spec.lr_scale.
void init_scaled(std::vector<NamedParameter>& parameters, const ScaledInitMethod& method, uint64_t seed,
                 const std::vector<std::string>& output_projections,
                 const std::vector<std::string>& norm_weights = {"norm.weight"});

}  // namespace triax
