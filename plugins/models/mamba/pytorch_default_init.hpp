// Pieces of the Mamba models' initialisations: parameters are picked by the end of their names,
// and linear and conv1d weights take PyTorch's default.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "triax/init.hpp"
#include "triax/parameter.hpp"

namespace triax::mamba {

inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// PyTorch's default for Linear and Conv1d weights: kaiming_uniform(a = sqrt(5)) = U(+-1 / sqrt(fan_in)),
// times `scale`.
inline void init_default_uniform(const NamedParameter& p, int64_t fan_in, double scale, uint64_t seed) {
  const double bound = scale / std::sqrt(static_cast<double>(fan_in));
  init_uniform(p, -bound, bound, seed);
}

}  // namespace triax::mamba
