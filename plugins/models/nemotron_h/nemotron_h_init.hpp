// The random initialisation of a Nemotron-H model, Hugging Face's NemotronHPreTrainedModel's:
// the embedding, lm_head and every linear weight but the Mamba-2 mixers' out_proj ~
// N(0, initializer_range), biases 0, norms 1; each mixer's own parameters as
// mamba2_mixer_init.hpp, out_proj.weight divided by sqrt(num_hidden_layers) with
// rescale_prenorm_residual (true unless given). Every parameter's global values come from
// (seed, its name), so every topology starts alike.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <vector>

#include "nemotron_h_config.hpp"
#include "ssm_init.hpp"
#include "triax/parameter.hpp"

namespace triax::nemotron_h {

// model.init_method: initializer_range (0.02) and rescale_prenorm_residual (true), or path.
// Strict: ConfigError naming model.init_method.<key>.
mamba::SsmInit read_nemotron_h_init(const YAML::Node& init_method);

void init_nemotron_h(const std::vector<NamedParameter>& parameters, const NemotronHConfig& config,
                     const mamba::SsmInit& init, uint64_t seed);

}  // namespace triax::nemotron_h
