// Spectral muP (model.init_method: {use_mup: true}), as nanotron's SpectralMupParametrizator
// offers it: each parameter's initial scale and learning rate follow its role and its *global*
// fans, so that the best learning rate found on a narrow model still holds on a wide one
// (Yang, Simon, Bernstein 2023, "A Spectral Condition for Feature Learning", parametrisation 1):
//   Matrix     [fan_out, fan_in]: N(0, sigma), sigma = (1 / sqrt(fan_in)) * min(1, sqrt(fan_out / fan_in)),
//              learning rate x (fan_out / fan_in)
//   Embedding  N(0, 1), the base learning rate
//   Vector     gains 1 (norm weights) and biases 0 (names ending in ".bias"), the base learning rate
// Fans come from the meaningful global shape (triax/parameter.hpp), so every tp / pp / ep shard of
// a parameter gets the same values and the same scale as the single-rank model.
#pragma once

#include <cstdint>
#include <vector>

#include "triax/parameter.hpp"

namespace triax {

struct SpectralScale {
  double init_std = 0.0;  // Matrix and Embedding: the standard deviation of the initial weights
  double lr_scale = 1.0;  // the factor on the learning rate
};

// The rule above for one parameter role and its global fans (Vector: no std, lr_scale 1).
SpectralScale spectral_scale(ParameterRole role, int64_t fan_in, int64_t fan_out);

// fan_in and fan_out of a Matrix (the last two dimensions of its meaningful global shape; a stack
// of matrices such as [experts, fan_out, fan_in] counts one of them). Error for other shapes.
struct Fans {
  int64_t fan_in = 0, fan_out = 0;
};
Fans fans_of(const std::string& name, const ParameterSpec& spec);

// Draws every parameter by its role (normal values from the global generator of triax/init.hpp,
// norm gains 1, biases 0) and sets spec.lr_scale. A parameter without a declared role is an
// Error naming it: a muP model must declare every one.
void init_spectral_mup(std::vector<NamedParameter>& parameters, uint64_t seed);

}  // namespace triax
