#include "mamba_init.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "pytorch_default_init.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"

namespace triax::mamba {

SsmInit read_mamba_init(const YAML::Node& init_method) {
  SsmInit defaults;
  defaults.rescale_prenorm_residual = true;
  return SsmInit::read(init_method, defaults, /*with_n_residuals=*/true);
}

void init_mamba(const std::vector<NamedParameter>& parameters, const MambaConfig& c, const SsmInit& init,
                uint64_t seed) {
  const SsmConfig& s = c.ssm;
  const double dt_std = std::pow(static_cast<double>(c.dt_rank()), -0.5) * s.dt_scale;
  const double out_scale = init.out_proj_scale(c.num_hidden_layers);
  for (const NamedParameter& p : parameters) {
    const std::string& name = p.name;
    at::NoGradGuard no_grad;
    if (ends_with(name, "embeddings.weight")) {
      init_normal(p, init.initializer_range, seed);
    } else if (ends_with(name, "norm.weight") || ends_with(name, "norm_f.weight") || ends_with(name, ".D")) {
      init_constant(p, 1.0);
    } else if (ends_with(name, "in_proj.weight") || ends_with(name, "lm_head.weight")) {
      init_default_uniform(p, c.d_model, 1.0, seed);
    } else if (ends_with(name, "in_proj.bias") || ends_with(name, "out_proj.bias")) {
      init_constant(p, 0.0);
    } else if (ends_with(name, "conv1d.weight") || ends_with(name, "conv1d.bias")) {
      init_default_uniform(p, s.d_conv, 1.0, seed);  // fan_in: one input channel times d_conv taps
    } else if (ends_with(name, "x_proj.weight")) {
      init_default_uniform(p, c.d_inner(), 1.0, seed);
    } else if (ends_with(name, "out_proj.weight")) {
      init_default_uniform(p, c.d_inner(), out_scale, seed);
    } else if (ends_with(name, "dt_proj.weight")) {
      if (s.dt_init == "constant")
        init_constant(p, dt_std);
      else
        init_uniform(p, -dt_std, dt_std, seed);
    } else if (ends_with(name, "dt_proj.bias")) {
      init_dt_bias(p, s.dt_min, s.dt_max, s.dt_init_floor, seed);
    } else if (ends_with(name, "A_log")) {
      init_a_log(p, s.d_state);  // per channel: log(1..d_state)
    } else {
      throw Error("mamba: no initialisation for parameter '" + name + "'");
    }
  }
}

}  // namespace triax::mamba
