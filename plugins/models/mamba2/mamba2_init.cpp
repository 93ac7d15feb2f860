#include "mamba2_init.hpp"

#include <ATen/ATen.h>

#include <string>

#include "mamba2_mixer_init.hpp"
#include "pytorch_default_init.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"

namespace triax::mamba2 {

using mamba::ends_with;

mamba::SsmInit read_mamba2_init(const YAML::Node& init_method) {
  return mamba::SsmInit::read(init_method, mamba::SsmInit{}, /*with_n_residuals=*/false);
}

void init_mamba2(const std::vector<NamedParameter>& parameters, const Mamba2Config& c, const mamba::SsmInit& init,
                 uint64_t seed) {
  const double out_scale = init.out_proj_scale(c.num_hidden_layers);
  for (const NamedParameter& p : parameters) {
    if (init_mamba2_mixer_parameter(p, c, init.initializer_range, out_scale, seed)) continue;
    const std::string& name = p.name;
    at::NoGradGuard no_grad;
    if (ends_with(name, "embeddings.weight") || ends_with(name, "lm_head.weight")) {
      init_normal(p, init.initializer_range, seed);
    } else if (ends_with(name, "norm.weight") || ends_with(name, "norm_f.weight")) {
      init_constant(p, 1.0);
    } else {
      throw Error("mamba2: no initialisation for parameter '" + name + "'");
    }
  }
}

}  // namespace triax::mamba2
