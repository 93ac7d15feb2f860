// The lm_head and the vocabulary-parallel cross-entropy fused into one autograd function that
// never holds the logits of the whole batch: it walks the tokens in chunks, and each chunk's
// logits live only while that chunk is processed (forward, and again in backward).
//
// Forward, per chunk: logits = hidden_chunk @ weight^T in the model's dtype (only this rank's real
// vocabulary rows: padded rows are never multiplied), then per token in fp32 the row max, the sum
// of exp(logit - max) and the label's logit. After the last chunk, one all-reduce of the max and
// one of [sum of exponentials, label score] over the tensor-parallel group, for the whole batch.
// Backward, per chunk: the logits again, (softmax - one_hot) times the token's weight and the
// incoming gradient, then grad_hidden = g @ weight and grad_weight += g^T @ hidden (fp32
// accumulation for bf16/fp16 weights). On CUDA the per-chunk softmax statistics and gradient are
// kernels (sdk/src/kernels/cross_entropy.cu); elsewhere LibTorch ops.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"

namespace triax {

// hidden: [tokens, hidden] as the lm_head sees it (after gather_column_parallel_input, which
// sums grad_hidden over tp in backward); weight: [padded vocab / tp, hidden], this rank's
// vocabulary rows [vocab_start, vocab_start + padded vocab / tp), in hidden's dtype; labels:
// [tokens] global ids; mask: [tokens] (any dtype) or undefined (every token counts).
// vocab_size: the real vocabulary; rows at or beyond it are padding (zero gradient), and a label
// outside [0, vocab_size) matches no row. chunk_tokens: tokens per chunk, 0 = as many as keep one
// chunk's logits under 64 Mi elements. Returns, like vocab_parallel_cross_entropy, the mean
// loss over counted tokens (masked sum / max(mask sum, 1)), fp32 (fp64 for fp64 inputs).
at::Tensor fused_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                      const at::Tensor& mask, int64_t vocab_start, int64_t vocab_size,
                                      const TensorParallel& tp, int64_t chunk_tokens = 0);

}  // namespace triax
