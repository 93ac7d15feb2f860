#include "mamba_init.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "pytorch_default_init.hpp"
#include "triax/config_reader.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"

namespace triax::mamba {

MambaInit MambaInit::read(const YAML::Node& init_method) {
  ConfigReader reader(init_method.IsDefined() && !init_method.IsNull() ? init_method
                                                                        : YAML::Node(YAML::NodeType::Map),
                      "model.init_method");
  reader.ignore("path");  // the host's: it copies the weights over this initialisation
  MambaInit init;
  init.initializer_range = reader.get<double>("initializer_range", init.initializer_range);
  init.rescale_prenorm_residual = reader.get<bool>("rescale_prenorm_residual", init.rescale_prenorm_residual);
  init.n_residuals_per_layer = reader.get<int64_t>("n_residuals_per_layer", init.n_residuals_per_layer);
  reader.finish();
  if (!(init.initializer_range >= 0.0))
    reader.fail("initializer_range", "must not be negative, got " + std::to_string(init.initializer_range));
  if (init.n_residuals_per_layer < 1)
    reader.fail("n_residuals_per_layer", "must be positive, got " + std::to_string(init.n_residuals_per_layer));
  return init;
}

void init_mamba(const std::vector<NamedParameter>& parameters, const MambaConfig& c, const MambaInit& init,
                uint64_t seed) {
  const SsmConfig& s = c.ssm;
  const double dt_std = std::pow(static_cast<double>(c.dt_rank()), -0.5) * s.dt_scale;
  const double out_scale = init.rescale_prenorm_residual
                               ? 1.0 / std::sqrt(static_cast<double>(init.n_residuals_per_layer * c.num_hidden_layers))
                               : 1.0;
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
      const double log_min = std::log(s.dt_min), log_max = std::log(s.dt_max);
      init_global(p, seed, [&](at::Tensor& global, at::Generator& generator) {
        at::Tensor dt = at::exp(global.uniform_(0.0, 1.0, generator) * (log_max - log_min) + log_min)
                            .clamp_min(s.dt_init_floor);
        global.copy_(dt + at::log(-at::expm1(-dt)));  // softplus(bias) = dt
      });
    } else if (ends_with(name, "A_log")) {
      const at::Tensor states = at::arange(1, s.d_state + 1, at::TensorOptions().dtype(at::kFloat));
      p.tensor.copy_(at::log(states).expand_as(p.tensor));
    } else {
      throw Error("mamba: no initialisation for parameter '" + name + "'");
    }
  }
}

}  // namespace triax::mamba
