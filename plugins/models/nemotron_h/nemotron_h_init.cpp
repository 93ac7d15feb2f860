#include "nemotron_h_init.hpp"

#include <ATen/ATen.h>

#include <string>

#include "layer_kinds.hpp"
#include "pytorch_default_init.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"

namespace triax::nemotron_h {
namespace {

using mamba::ends_with;

// The layer a parameter "backbone.layers.<i>.mixer.*" belongs to; -1 for any other name.
int64_t mixer_layer(const std::string& name) {
  const std::string prefix = "backbone.layers.";
  if (name.rfind(prefix, 0) != 0) return -1;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || name.compare(dot, 7, ".mixer.") != 0) return -1;
  return std::stoll(name.substr(prefix.size(), dot - prefix.size()));
}

}  // namespace

mamba::SsmInit read_nemotron_h_init(const YAML::Node& init_method) {
  mamba::SsmInit defaults;
  defaults.rescale_prenorm_residual = true;  // NemotronHConfig's default
  return mamba::SsmInit::read(init_method, defaults, /*with_n_residuals=*/false);
}

void init_nemotron_h(const std::vector<NamedParameter>& parameters, const NemotronHConfig& c,
                     const mamba::SsmInit& init, uint64_t seed) {
  const LayerInit layer_init{init.initializer_range, init.out_proj_scale(c.num_hidden_layers), seed};
  for (const NamedParameter& p : parameters) {
    const std::string& name = p.name;
    at::NoGradGuard no_grad;
    if (const int64_t layer = mixer_layer(name); layer >= 0) {
      if (!layer_kind(c.letter(layer)).init_parameter(p, c, layer_init))
        throw Error("nemotron_h: no initialisation for parameter '" + name + "'");
    } else if (ends_with(name, "embeddings.weight") || ends_with(name, "lm_head.weight")) {
      init_normal(p, init.initializer_range, seed);
    } else if (ends_with(name, "norm.weight") || ends_with(name, "norm_f.weight")) {
      init_constant(p, 1.0);
    } else {
      throw Error("nemotron_h: no initialisation for parameter '" + name + "'");
    }
  }
}

}  // namespace triax::nemotron_h
