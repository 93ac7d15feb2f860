// The random initialisation of a Mamba-2 model, Hugging Face's Mamba2PreTrainedModel's:
//   embedding, in_proj and lm_head weights ~ N(0, initializer_range), linear biases 0; norms 1;
//   conv1d.weight and out_proj.weight PyTorch's default (kaiming-uniform, a = sqrt(5):
//   U(+-1 / sqrt(fan_in))), conv1d.bias 0; A_log = log(1..num_heads); D = 1; dt_bias the inverse
//   softplus of dt = exp(U(log time_step_min, log time_step_max)), floored at time_step_floor;
//   with rescale_prenorm_residual, out_proj.weight divided by sqrt(num_hidden_layers).
// Every parameter's global values come from (seed, its name), so every topology starts alike.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <vector>

#include "mamba2_config.hpp"
#include "ssm_init.hpp"
#include "triax/parameter.hpp"

namespace triax::mamba2 {

// model.init_method as Hugging Face's Mamba2Config has it (mamba::SsmInit): initializer_range and
// rescale_prenorm_residual (false unless given), no n_residuals_per_layer. Strict: ConfigError
// naming model.init_method.<key>.
mamba::SsmInit read_mamba2_init(const YAML::Node& init_method);

void init_mamba2(const std::vector<NamedParameter>& parameters, const Mamba2Config& config,
                 const mamba::SsmInit& init, uint64_t seed);

}  // namespace triax::mamba2
