// The optimizer interface plugin authors implement. The host hands over gradients already
// accumulated in fp32, reduced across data parallel ranks and clipped; the optimizer updates
// its parameters (and keeps master weights and moments as it sees fit).
#pragma once

#include <ATen/core/Tensor.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/host.hpp"

namespace triax {

struct OptimizerParam {
  std::string name;
  at::Tensor param;
  double weight_decay = 0.0;  // resolved: 0 where excluded
  uint32_t flags = 0;
};

struct OptimizerContext {
  int dp_rank = 0, dp_size = 1;
  YAML::Node optimizer;  // the whole `optimizer` section
  Host host;
  static OptimizerContext from_c(const triax_optimizer_context& context);
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // grads[i] belongs to the i-th parameter given at creation.
  virtual void step(const std::vector<at::Tensor>& grads, double learning_rate) = 0;
  virtual int64_t state_bytes() const = 0;
};

}  // namespace triax
