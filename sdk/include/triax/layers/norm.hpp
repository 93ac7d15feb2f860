// The norms over the hidden dimension, computed in fp32 whatever the input dtype (in fp64 for
// fp64 input):
//   RMSNorm:   y = x / sqrt(mean(x^2) + eps) * weight, through the fused op triax::rms_norm
//              (triax/layers/fused_ops.hpp);
//   LayerNorm: y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias (GPT-2's ln_1, ln_2, ln_f).
//
// Their parameters are replicated over tp. In REDUCE_SCATTER mode each rank normalises only its
// sequence shard, so the parameters' gradients are summed over tp inside forward (see
// replicated_on_sequence_shard): every rank ends up with the whole gradient.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

#include "triax/layers/tensor_parallel.hpp"
#include "triax/parameter.hpp"
#include "triax/residual_stream.hpp"

namespace triax {

class RMSNorm : public SpecifiedModule {
 public:
  RMSNorm(int64_t hidden_size, double eps, c10::Device device, c10::ScalarType dtype,
          const TensorParallel& tp = TensorParallel());
  at::Tensor forward(const at::Tensor& x);
  // The residual add before the norm, fused with it (triax::add_rms_norm): {x + y, forward(x + y)}.
  std::pair<at::Tensor, at::Tensor> forward_after_add(const at::Tensor& x, const at::Tensor& y);
  // {the stream's sum, its norm}: forward_after_add when an add is pending, else forward.
  std::pair<at::Tensor, at::Tensor> forward_of_stream(const ResidualStream& stream);
  at::Tensor weight;  // [hidden], initialised to ones
  double eps() const { return eps_; }
  // Whether the kernel also computes the amax of the norm, for the fp8 products that read it
  // (switched on by convert_linears_to_fp8, triax/fp8.hpp; docs/fp8.md).
  void record_output_amax(bool on) { record_output_amax_ = on; }
  bool records_output_amax() const { return record_output_amax_; }

 private:
  double eps_;
  TensorParallel tp_;
  bool record_output_amax_ = false;
};

class LayerNorm : public SpecifiedModule {
 public:
  LayerNorm(int64_t hidden_size, double eps, c10::Device device, c10::ScalarType dtype,
            const TensorParallel& tp = TensorParallel());
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;  // [hidden], initialised to ones
  at::Tensor bias;    // [hidden], initialised to zeros, no weight decay
  double eps() const { return eps_; }

 private:
  double eps_;
  TensorParallel tp_;
};

}  // namespace triax
