#include "mamba2_init.hpp"

#include <ATen/ATen.h>

#include <string>

#include "pytorch_default_init.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"

namespace triax::mamba2 {

using mamba::ends_with;
using mamba::init_default_uniform;

mamba::SsmInit read_mamba2_init(const YAML::Node& init_method) {
  return mamba::SsmInit::read(init_method, mamba::SsmInit{}, /*with_n_residuals=*/false);
}

void init_mamba2(const std::vector<NamedParameter>& parameters, const Mamba2Config& c, const mamba::SsmInit& init,
                 uint64_t seed) {
  const double out_scale = init.out_proj_scale(c.num_hidden_layers);
  for (const NamedParameter& p : parameters) {
    const std::string& name = p.name;
    at::NoGradGuard no_grad;
    if (ends_with(name, "embeddings.weight") || ends_with(name, "in_proj.weight") ||
        ends_with(name, "lm_head.weight")) {
      init_normal(p, init.initializer_range, seed);
    } else if (ends_with(name, "norm.weight") || ends_with(name, "norm_f.weight") || ends_with(name, ".D")) {
      init_constant(p, 1.0);
    } else if (ends_with(name, "proj.bias") || ends_with(name, "conv1d.bias")) {
      init_constant(p, 0.0);
    } else if (ends_with(name, "conv1d.weight")) {
      init_default_uniform(p, c.conv_kernel, 1.0, seed);  // fan_in: one input channel times conv_kernel taps
    } else if (ends_with(name, "out_proj.weight")) {
      init_default_uniform(p, c.d_inner(), out_scale, seed);
    } else if (ends_with(name, "dt_bias")) {
      mamba::init_dt_bias(p, c.time_step_min, c.time_step_max, c.time_step_floor, seed);
    } else if (ends_with(name, "A_log")) {
      mamba::init_a_log(p, c.num_heads);  // one per head
    } else {
      throw Error("mamba2: no initialisation for parameter '" + name + "'");
    }
  }
}

}  // namespace triax::mamba2
