// Parameter initialisation that does not depend on the topology: each parameter's *global*
// values come from a generator seeded by (seed, parameter name), and each rank keeps its shard.
// A model initialised at tp=2, pp=2 therefore holds exactly the values of the tp=1, pp=1 model.
#pragma once

#include <cstdint>
#include <string>

#include "triax/parameter.hpp"

namespace triax {

// Deterministic 64-bit seed for one parameter.
uint64_t parameter_seed(uint64_t seed, const std::string& name);

// Normal(0, std) over the global shape, this rank's shard copied into the parameter.
void init_normal(const NamedParameter& parameter, double std, uint64_t seed);
void init_constant(const NamedParameter& parameter, double value);

}  // namespace triax
