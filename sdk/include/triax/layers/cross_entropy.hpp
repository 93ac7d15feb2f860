// Cross-entropy over vocabulary-parallel logits: each tp rank holds logits for its slice of the
// vocabulary and no rank ever materialises the full-vocabulary row.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"

namespace triax {

// logits: [tokens, vocab/tp] (any float dtype; computed in fp32), labels: [tokens] int64 global
// ids, mask: [tokens] float or undefined. vocab_start: first vocabulary id of this shard.
// vocab_size: real (unpadded) vocabulary; padded columns never win. Returns the fp32 mean over
// counted tokens (fp64 logits are computed in, and return, fp64). The gradient reaching the
// logits is (softmax - one_hot) on this rank's columns (see vocab_parallel_token_losses).
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& mask,
                                        int64_t vocab_start, int64_t vocab_size, const TensorParallel& tp);

}  // namespace triax
