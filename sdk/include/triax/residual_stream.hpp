// The hidden state between two pre-norm layers as residual + pending, the add not yet done: a
// layer whose last op is a residual add can leave it to the next layer, whose norm then adds
// inside its kernel (RMSNorm::forward_of_stream, add_rms_norm): one elementwise pass fewer each
// way per layer. pending undefined: the hidden state is residual itself.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

namespace triax {

struct ResidualStream {
  at::Tensor residual;
  at::Tensor pending;

  at::Tensor materialized() const { return pending.defined() ? residual + pending : residual; }
};

}  // namespace triax
