// What the Mamba and Mamba-2 initialisations share: the model.init_method section and the
// state-space parameters, dt's bias (mamba-ssm's log-uniform dt) and A_log (A = -(1..n)).
#pragma once

#include <ATen/ATen.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "triax/config_reader.hpp"
#include "triax/init.hpp"
#include "triax/parameter.hpp"

namespace triax::mamba {

// model.init_method: initializer_range, rescale_prenorm_residual, n_residuals_per_layer (nanotron's
// Mamba only), or path (weights the host loads over this initialisation).
struct SsmInit {
  double initializer_range = 0.02;
  bool rescale_prenorm_residual = false;
  int64_t n_residuals_per_layer = 1;

  // out_proj.weight's factor: 1 / sqrt(n_residuals_per_layer x num_layers) with
  // rescale_prenorm_residual, 1 without.
  double out_proj_scale(int64_t num_layers) const {
    return rescale_prenorm_residual ? 1.0 / std::sqrt(static_cast<double>(n_residuals_per_layer * num_layers)) : 1.0;
  }

  // Strict: ConfigError naming model.init_method.<key>. `defaults`: each key's value when absent;
  // n_residuals_per_layer is a key only `with_n_residuals` (unknown otherwise).
  static SsmInit read(const YAML::Node& init_method, const SsmInit& defaults, bool with_n_residuals) {
    ConfigReader reader(init_method.IsDefined() && !init_method.IsNull() ? init_method
                                                                          : YAML::Node(YAML::NodeType::Map),
                        "model.init_method");
    reader.ignore("path");  // the host's: it copies the weights over this initialisation
    SsmInit init = defaults;
    init.initializer_range = reader.get<double>("initializer_range", init.initializer_range);
    init.rescale_prenorm_residual = reader.get<bool>("rescale_prenorm_residual", init.rescale_prenorm_residual);
    if (with_n_residuals)
      init.n_residuals_per_layer = reader.get<int64_t>("n_residuals_per_layer", init.n_residuals_per_layer);
    reader.finish();
    if (!(init.initializer_range >= 0.0))
      reader.fail("initializer_range", "must not be negative, got " + std::to_string(init.initializer_range));
    if (init.n_residuals_per_layer < 1)
      reader.fail("n_residuals_per_layer", "must be positive, got " + std::to_string(init.n_residuals_per_layer));
    return init;
  }
};

// A bias whose softplus is dt = exp(U(log dt_min, log dt_max)), floored at dt_floor.
inline void init_dt_bias(const NamedParameter& p, double dt_min, double dt_max, double dt_floor, uint64_t seed) {
  const double log_min = std::log(dt_min), log_max = std::log(dt_max);
  init_global(p, seed, [&](at::Tensor& global, at::Generator& generator) {
    const at::Tensor dt =
        at::exp(global.uniform_(0.0, 1.0, generator) * (log_max - log_min) + log_min).clamp_min(dt_floor);
    global.copy_(dt + at::log(-at::expm1(-dt)));  // softplus(bias) = dt
  });
}

// A_log = log(1..n) along its last dimension, the same in every row; written over the global
// shape, so a tp shard of that dimension (Mamba-2's heads) holds its own part.
inline void init_a_log(const NamedParameter& p, int64_t n) {
  init_global(p, 0, [n](at::Tensor& global, at::Generator&) {
    const at::Tensor steps = at::arange(1, n + 1, global.options());
    global.copy_(at::log(steps).expand_as(global));
  });
}

}  // namespace triax::mamba
