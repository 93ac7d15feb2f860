// The random initialisation of one Mamba-2 mixer's parameters, Hugging Face's
// Mamba2PreTrainedModel's (NemotronH's alike): in_proj.weight ~ N(0, initializer_range), linear and
// conv biases 0, the gated norm's weight 1; conv1d.weight and out_proj.weight PyTorch's default
// (kaiming-uniform, a = sqrt(5): U(+-1 / sqrt(fan_in))), out_proj.weight times `out_proj_scale`;
// A_log = log(1..num_heads); D = 1; dt_bias the inverse softplus of dt = exp(U(log time_step_min,
// log time_step_max)), floored at time_step_floor. Every parameter's global values come from
// (seed, its name), so every topology starts alike.
#pragma once

#include <cstdint>

#include "mamba2_mixer_config.hpp"
#include "triax/parameter.hpp"

namespace triax::mamba2 {

// Initialises `p` when its name is one of a mixer's parameters; false (and `p` untouched) otherwise.
bool init_mamba2_mixer_parameter(const NamedParameter& p, const Mamba2MixerConfig& config, double initializer_range,
                                 double out_proj_scale, uint64_t seed);

}  // namespace triax::mamba2
