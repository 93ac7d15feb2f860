#include "mamba2_init.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "pytorch_default_init.hpp"
#include "triax/config_reader.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"

namespace triax::mamba2 {
namespace {

using mamba::ends_with;
using mamba::init_default_uniform;

void init_dt_bias(const NamedParameter& p, const Mamba2Config& c, uint64_t seed) {
  const double log_min = std::log(c.time_step_min), log_max = std::log(c.time_step_max);
  init_global(p, seed, [&](at::Tensor& global, at::Generator& generator) {
    const at::Tensor dt =
        at::exp(global.uniform_(0.0, 1.0, generator) * (log_max - log_min) + log_min).clamp_min(c.time_step_floor);
    global.copy_(dt + at::log(-at::expm1(-dt)));  // softplus(dt_bias) = dt
  });
}

}  // namespace

Mamba2Init Mamba2Init::read(const YAML::Node& init_method) {
  ConfigReader reader(init_method.IsDefined() && !init_method.IsNull() ? init_method
                                                                        : YAML::Node(YAML::NodeType::Map),
                      "model.init_method");
  reader.ignore("path");  // the host's: it copies the weights over this initialisation
  Mamba2Init init;
  init.initializer_range = reader.get<double>("initializer_range", init.initializer_range);
  init.rescale_prenorm_residual = reader.get<bool>("rescale_prenorm_residual", init.rescale_prenorm_residual);
  reader.finish();
  if (!(init.initializer_range >= 0.0))
    reader.fail("initializer_range", "must not be negative, got " + std::to_string(init.initializer_range));
  return init;
}

void init_mamba2(const std::vector<NamedParameter>& parameters, const Mamba2Config& c, const Mamba2Init& init,
                 uint64_t seed) {
  const double out_scale =
      init.rescale_prenorm_residual ? 1.0 / std::sqrt(static_cast<double>(c.num_hidden_layers)) : 1.0;
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
      init_dt_bias(p, c, seed);
    } else if (ends_with(name, "A_log")) {
      p.tensor.copy_(at::log(at::arange(1, c.num_heads + 1, at::TensorOptions().dtype(at::kFloat))));
    } else {
      throw Error("mamba2: no initialisation for parameter '" + name + "'");
    }
  }
}

}  // namespace triax::mamba2
