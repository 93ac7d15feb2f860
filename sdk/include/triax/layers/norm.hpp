// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, computed in fp32 whatever the input dtype
// (in fp64 for fp64 input).
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/parameter.hpp"

namespace triax {

class RMSNorm : public SpecifiedModule {
 public:
  RMSNorm(int64_t hidden_size, double eps, c10::Device device, c10::ScalarType dtype);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;  // [hidden], initialised to ones
  double eps() const { return eps_; }

 private:
  double eps_;
};

}  // namespace triax
