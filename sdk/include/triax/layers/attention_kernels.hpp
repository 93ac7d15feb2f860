// Attention with its log-sum-exp, forward and backward, as ring attention's blocks need it
// (ring_blocks.hpp): the output alone (scaled_dot_product_attention) cannot be merged with
// another block's, nor can its backward be told the merged softmax.
//
// CPU: ATen's flash attention for CPU. CUDA: the memory-efficient kernel (it takes a mask as an
// additive bias); compiled in CUDA builds, not run by the test suite (it runs on CPU).
#pragma once

#include <ATen/core/Tensor.h>

#include <array>

namespace triax {

struct AttentionWithLse {
  at::Tensor out;  // [batch, heads, queries, head_dim], q's dtype
  at::Tensor lse;  // [batch, heads, queries], the accumulation type; -inf where a query sees no key
};

// q, k, v: [batch, heads, length, head_dim] (k and v with q's heads). visible: boolean
// [batch or 1, 1, queries, keys] or undefined (every key, or with `causal` the lower triangle).
AttentionWithLse attention_with_lse(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& visible, bool causal, double scale);

// dq, dk, dv of one block of keys, given the softmax's output and log-sum-exp over every key
// the queries see (the merged ones: the block's probabilities are exp(scores - lse)).
std::array<at::Tensor, 3> attention_with_lse_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                      const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                                                      const at::Tensor& lse, const at::Tensor& visible, bool causal,
                                                      double scale);

}  // namespace triax
