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

#include "triax/layers/decode_norm_gemv.hpp"
#include "triax/layers/fused_ops.hpp"
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
  // {the stream's sum, `matrix` times its norm} at a decoding step's size, the norm folded into
  // the product's kernel (decode_norm_gemv); both undefined where that does not apply (amaxes
  // recorded for fp8 included).
  NormedProduct forward_of_stream_times(const ResidualStream& stream, const at::Tensor& matrix, DecodeProduct kind);
  at::Tensor weight;  // [hidden], initialised to ones
  double eps() const { return eps_; }
  // Which amaxes the kernels also compute (triax/layers/fused_ops.hpp): the norm's, for the fp8
  // products that read it, and the input gradient's, for the fp8 product whose output was added
  // in front of the norm (set by convert_linears_to_fp8, triax/fp8.hpp; docs/fp8.md).
  void record_amax(AmaxRecording recording) { amax_recording_ = recording; }
  AmaxRecording amax_recording() const { return amax_recording_; }

 private:
  double eps_;
  TensorParallel tp_;
  AmaxRecording amax_recording_ = AmaxRecording::None;
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
