// A linear layer over an activation function whose output is not kept for backward (selective
// recomputation, parallelism.recompute_mlp_activation). linear(activation(x), weight) keeps x
// and the weight only; its backward runs the activation again from x (one elementwise pass) for
// the weight gradient and the activation's own gradient. In a SwiGLU MLP the activation's output
// is the widest tensor a layer keeps besides gate/up (ffn / hidden times the hidden state).
// Results equal those of the plain composition bit for bit: the same operations on the same values.
#pragma once

#include <ATen/core/Tensor.h>

namespace triax {

enum class RecomputedActivation {
  SwigluHalves,  // swiglu_halves (triax/layers/fused_ops.hpp): x [..., 2n] holds gate then up
  GeluTanh,      // at::gelu(x, "tanh") (GPT-2)
};

// activation(x) for the activation named.
at::Tensor apply_activation(RecomputedActivation activation, const at::Tensor& x);

// at::linear(apply_activation(activation, x), weight) without keeping the activation's output.
// weight: [out, in] (any strides); x: [..., in] for GeluTanh, [..., 2 in] for SwigluHalves.
at::Tensor linear_of_recomputed_activation(RecomputedActivation activation, const at::Tensor& x,
                                           const at::Tensor& weight);

}  // namespace triax
