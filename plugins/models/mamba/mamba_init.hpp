// The random initialisation of a Mamba model, nanotron's Mamba example's (itself mamba-ssm's):
//   embedding ~ N(0, initializer_range); norms 1; linear and conv1d weights PyTorch's default
//   (kaiming-uniform with a = sqrt(5): U(+-1 / sqrt(fan_in))), conv1d.bias likewise, linear
//   biases 0; dt_proj.weight U(+-s) ("random") or s ("constant"), s = dt_rank^-0.5 * dt_scale;
//   dt_proj.bias the inverse softplus of dt = exp(U(log dt_min, log dt_max)), floored at
//   dt_init_floor; A_log = log(1..d_state) per channel; D = 1; with rescale_prenorm_residual,
//   out_proj.weight divided by sqrt(n_residuals_per_layer * num_hidden_layers).
// Every parameter's global values come from (seed, its name), so every topology starts alike.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <vector>

#include "mamba_config.hpp"
#include "ssm_init.hpp"
#include "triax/parameter.hpp"

namespace triax::mamba {

// model.init_method as nanotron's MambaInit reads it (SsmInit): rescale_prenorm_residual true
// unless given, n_residuals_per_layer a key. Strict: ConfigError naming model.init_method.<key>.
SsmInit read_mamba_init(const YAML::Node& init_method);

void init_mamba(const std::vector<NamedParameter>& parameters, const MambaConfig& config, const SsmInit& init,
                uint64_t seed);

}  // namespace triax::mamba
