// The lm_head and the vocabulary-parallel cross-entropy fused into one autograd function that
// never holds the logits of the whole batch: it walks the tokens in chunks, and each chunk's
// logits live only while that chunk is processed.
//
// Forward, per chunk: logits = hidden_chunk @ weight^T in the model's dtype (only this rank's real
// vocabulary rows: padded rows are never multiplied), then per token in fp32 the row max, the sum
// of exp(logit - max) and the label's logit. After the last chunk, one all-reduce of the max and
// one of [sum of exponentials, label score] over the tensor-parallel group, for the whole batch.
// The gradients: per chunk, (softmax - one_hot) times the token's weight, then grad_hidden = g @
// weight and grad_weight += g^T @ hidden (fp32 sums for bf16/fp16 weights), scaled by the loss's
// incoming gradient at the end. At tp = 1, when gradients are wanted, this happens in forward,
// right after each chunk's statistics (which are then complete), so each chunk's logits are
// computed once; only one such set waits for its backward at a time in a process (later forwards
// in flight leave theirs to backward). At tp > 1 the statistics need the all-reduce first, and
// backward computes each chunk's logits again. On CUDA the per-chunk statistics and gradient are kernels
// (sdk/src/kernels/cross_entropy.cu); elsewhere LibTorch ops.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"

namespace triax {

// hidden: [tokens, hidden] as the lm_head sees it (after gather_column_parallel_input, which
// sums grad_hidden over tp in backward); weight: [padded vocab / tp, hidden], this rank's
// vocabulary rows [vocab_start, vocab_start + padded vocab / tp), in hidden's dtype; labels:
// [tokens] global ids; mask: [tokens] (any dtype) or undefined (every token counts).
// vocab_size: the real vocabulary; rows at or beyond it are padding (zero gradient), and a label
// outside [0, vocab_size) matches no row. chunk_tokens: tokens per chunk, 0 = equal chunks of
// about 256 Mi logits at most. Returns, like vocab_parallel_cross_entropy, the mean
// loss over counted tokens (masked sum / max(mask sum, 1)), fp32 (fp64 for fp64 inputs).
at::Tensor fused_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                      const at::Tensor& mask, int64_t vocab_start, int64_t vocab_size,
                                      const TensorParallel& tp, int64_t chunk_tokens = 0);

// The same loss, and each token's logsumexp over the real vocabulary [tokens] (fp32; the same on
// every tp rank), differentiable: what a z-loss needs. Backward computes the logits again at any tp.
struct LossAndLogsumexp {
  at::Tensor loss, logsumexp;
};
LossAndLogsumexp fused_linear_cross_entropy_with_logsumexp(const at::Tensor& hidden, const at::Tensor& weight,
                                                           const at::Tensor& labels, const at::Tensor& mask,
                                                           int64_t vocab_start, int64_t vocab_size,
                                                           const TensorParallel& tp, int64_t chunk_tokens = 0);

}  // namespace triax
