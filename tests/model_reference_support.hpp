// What the model plugins' reference computations in the tests share: parameters as fp64 tensors
// by name, an RMSNorm in plain ops, and the largest elementwise difference.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <string>
#include <vector>

#include "triax/causal_lm.hpp"

namespace triax::test {

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// This rank's parameters, detached, in fp64, by name.
inline std::map<std::string, at::Tensor> parameters_of(CausalLm& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : model.parameter_table()) out[p.name] = p.tensor.detach().to(at::kDouble);
  return out;
}

// Parameters whose names hold one of `name_parts` redrawn from N(0, 0.3), in table order from one
// generator seeded `seed`: biases initialised to 0 must still count in a comparison.
inline void randomize_parameters(CausalLm& model, const std::vector<std::string>& name_parts, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& p : model.parameter_table())
    for (const std::string& part : name_parts)
      if (p.name.find(part) != std::string::npos) {
        p.tensor.normal_(0.0, 0.3, generator);
        break;
      }
}

inline at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * weight;
}

}  // namespace triax::test
