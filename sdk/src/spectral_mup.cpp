#include "triax/spectral_mup.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "triax/error.hpp"
#include "triax/glob_match.hpp"
#include "triax/init.hpp"

namespace triax {

SpectralScale spectral_scale(ParameterRole role, int64_t fan_in, int64_t fan_out) {
  SpectralScale scale;
  switch (role) {
    case ParameterRole::Matrix: {
      if (fan_in < 1 || fan_out < 1)
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "spectral muP: a matrix of fan_in " + std::to_string(fan_in) +
                                                      " and fan_out " + std::to_string(fan_out));
      const double ratio = static_cast<double>(fan_out) / static_cast<double>(fan_in);
      scale.init_std = std::min(1.0, std::sqrt(ratio)) / std::sqrt(static_cast<double>(fan_in));
      scale.lr_scale = ratio;
      break;
    }
    case ParameterRole::Embedding:
      scale.init_std = 1.0;
      break;
    case ParameterRole::Vector:
      break;
    case ParameterRole::FusedMatrix:  // init_spectral_mup passes Matrix with the fused fans
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "spectral muP: a fused matrix's scale needs its fans (fans_of)");
    case ParameterRole::Undeclared:
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "spectral muP: a parameter without a declared role");
  }
  return scale;
}

Fans fans_of(const std::string& name, const ParameterSpec& spec) {
  const std::vector<int64_t>& shape = spec.meaningful_shape();
  if (shape.size() < 2)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "spectral muP: matrix parameter '" + name + "' has " +
                                                  std::to_string(shape.size()) + " dimensions, at least 2 expected");
  if (spec.role != ParameterRole::FusedMatrix) return {shape[shape.size() - 1], shape[shape.size() - 2]};
  if (spec.part_fan_out < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "spectral muP: fused matrix '" + name + "' does not say how wide its widest part is (part_fan_out)");
  return {shape.back(), spec.part_fan_out};
}

void init_spectral_mup(std::vector<NamedParameter>& parameters, uint64_t seed) {
  for (NamedParameter& parameter : parameters) {
    const ParameterRole role = parameter.spec.role;
    if (role == ParameterRole::Undeclared)
      throw Error(TRIAX_ERROR_UNSUPPORTED, "model.init_method.use_mup: parameter '" + parameter.name +
                                               "' declares no role (Matrix, Embedding or Vector) for spectral muP");
    const bool matrix = role == ParameterRole::Matrix || role == ParameterRole::FusedMatrix;
    const Fans fans = matrix ? fans_of(parameter.name, parameter.spec) : Fans{};
    const SpectralScale scale = spectral_scale(matrix ? ParameterRole::Matrix : role, fans.fan_in, fans.fan_out);
    parameter.spec.lr_scale = scale.lr_scale;
    if (role == ParameterRole::Vector)
      init_constant(parameter, ends_with(parameter.name, ".bias") ? 0.0 : 1.0);
    else
      init_normal(parameter, scale.init_std, seed);
  }
}

}  // namespace triax
