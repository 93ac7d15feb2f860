// The optimizer interface plugin authors implement. The host hands over gradients already
// accumulated in fp32, averaged across data parallel ranks and clipped; the optimizer updates
// its parameters (and keeps master weights and moments as it sees fit).
//
// An optimizer that shards its state ZeRO-style declares
//     static constexpr triax_gradient_sharding kGradientSharding = TRIAX_GRADIENTS_DP_SHARDED;
// and then receives, per parameter, only this dp rank's shard of the gradient (1-D, see
// triax/zero_partition.hpp); it all-gathers the updated parameters over the dp group itself.
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
  // What step() receives; a subclass redeclares it to change it (read at registration).
  static constexpr triax_gradient_sharding kGradientSharding = TRIAX_GRADIENTS_WHOLE;

  virtual ~Optimizer() = default;
  // grads[i] belongs to the i-th parameter given at creation (its dp shard when sharding).
  virtual void step(const std::vector<at::Tensor>& grads, double learning_rate) = 0;
  virtual int64_t state_bytes() const = 0;
};

}  // namespace triax
