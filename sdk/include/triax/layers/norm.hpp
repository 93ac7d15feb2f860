// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, computed in fp32 whatever the input dtype
// (in fp64 for fp64 input), through the fused op triax::rms_norm (triax/layers/fused_ops.hpp).
//
// The weight is replicated over tp. In REDUCE_SCATTER mode each rank normalises only its
// sequence shard, so the weight's gradient is summed over tp inside forward (see
// replicated_on_sequence_shard): every rank ends up with the whole gradient.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"
#include "triax/parameter.hpp"

namespace triax {

class RMSNorm : public SpecifiedModule {
 public:
  RMSNorm(int64_t hidden_size, double eps, c10::Device device, c10::ScalarType dtype,
          const TensorParallel& tp = TensorParallel());
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;  // [hidden], initialised to ones
  double eps() const { return eps_; }

 private:
  double eps_;
  TensorParallel tp_;
};

}  // namespace triax
