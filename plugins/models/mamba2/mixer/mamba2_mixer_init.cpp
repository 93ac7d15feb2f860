#include "mamba2_mixer_init.hpp"

#include <ATen/ATen.h>

#include <string>

#include "pytorch_default_init.hpp"
#include "ssm_init.hpp"
#include "triax/init.hpp"

namespace triax::mamba2 {

using mamba::ends_with;

bool init_mamba2_mixer_parameter(const NamedParameter& p, const Mamba2MixerConfig& c, double initializer_range,
                                 double out_proj_scale, uint64_t seed) {
  const std::string& name = p.name;
  at::NoGradGuard no_grad;
  if (ends_with(name, "in_proj.weight")) {
    init_normal(p, initializer_range, seed);
  } else if (ends_with(name, "mixer.norm.weight") || ends_with(name, ".D")) {
    init_constant(p, 1.0);
  } else if (ends_with(name, "in_proj.bias") || ends_with(name, "out_proj.bias") || ends_with(name, "conv1d.bias")) {
    init_constant(p, 0.0);
  } else if (ends_with(name, "conv1d.weight")) {
    mamba::init_default_uniform(p, c.conv_kernel, 1.0, seed);  // fan_in: one input channel times conv_kernel taps
  } else if (ends_with(name, "out_proj.weight")) {
    mamba::init_default_uniform(p, c.d_inner(), out_proj_scale, seed);
  } else if (ends_with(name, "dt_bias")) {
    mamba::init_dt_bias(p, c.time_step_min, c.time_step_max, c.time_step_floor, seed);
  } else if (ends_with(name, "A_log")) {
    mamba::init_a_log(p, c.num_heads);  // one per head
  } else {
    return false;
  }
  return true;
}

}  // namespace triax::mamba2
