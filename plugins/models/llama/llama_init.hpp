// Parameter initialisation of a Llama model from model.init_method.
//
//   {std: s}                  every linear and embedding weight ~ N(0, s); the output projections
//                             (o_proj, down_proj) ~ N(0, s / sqrt(2 * num_hidden_layers)), as
//                             nanotron's scaled init; norm weights 1; biases 0. Without std,
//                             s = model_config.initializer_range.
//   scaling_method            nanotron's: NUM_LAYERS (default, as above) or NONE (no scaling).
//   {path: ...}               initialising from a checkpoint: not available yet.
//
// Values come from triax::init_normal, seeded by (seed, parameter name): every topology starts
// from the same global values.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <vector>

#include "llama_config.hpp"
#include "triax/parameter.hpp"

namespace triax::llama {

struct InitMethod {
  double std = 0.02;
  double output_std = 0.02;  // o_proj and down_proj
};

// Reads model.init_method strictly (ConfigError naming model.init_method.<key>); a checkpoint
// path throws triax::Error(TRIAX_ERROR_UNSUPPORTED).
InitMethod read_init_method(const YAML::Node& init_method, const LlamaConfig& config);

void initialize_parameters(const std::vector<NamedParameter>& parameters, const InitMethod& method, uint64_t seed);

}  // namespace triax::llama
