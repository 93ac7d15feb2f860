// Differentiable communication over the tensor-parallel group: the only places where the SDK's
// parallel layers talk to other ranks. Each op is a collective in forward and its adjoint in
// backward, so autograd carries gradients across the group. With a group of one they return
// their input unchanged (no autograd node).
//
// Activations are [batch, seq, ...]: the sequence ops split and join along dim 1, which must
// divide evenly by the group size.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"

namespace triax {

// Forward: x unchanged. Backward: the gradient summed over tp. Where a replicated tensor enters
// computations that differ per rank (a column-parallel layer's input), each rank's gradient
// holds only its share.
at::Tensor identity_forward_all_reduce_backward(const at::Tensor& x, const TensorParallel& tp);

// Forward: x summed over tp (partial results of a row-parallel layer). Backward: the gradient
// unchanged, since every rank's output is the same sum.
at::Tensor all_reduce_forward_identity_backward(const at::Tensor& x, const TensorParallel& tp);

// Forward: [b, s/tp, ...] sequence shards joined in rank order into [b, s, ...]. Backward: the
// gradient summed over tp and split again (reduce-scatter).
at::Tensor all_gather_sequence(const at::Tensor& x, const TensorParallel& tp);

// Forward: [b, s, ...] partial results summed over tp, each rank keeping its sequence shard
// [b, s/tp, ...] (reduce-scatter). Backward: the shards' gradients joined (all-gather).
at::Tensor reduce_scatter_sequence(const at::Tensor& x, const TensorParallel& tp);

// A tp-replicated parameter (norm weight, row-parallel bias) used on this rank's activations.
// In REDUCE_SCATTER mode each rank sees only its sequence shard, so the parameter's gradient
// is summed over tp (identity_forward_all_reduce_backward); in ALL_REDUCE mode every rank sees
// the whole sequence and the parameter is returned as is.
at::Tensor replicated_on_sequence_shard(const at::Tensor& parameter, const TensorParallel& tp);

// A column-parallel layer's product on the activations between blocks: x [b, s, in] (REDUCE_
// SCATTER: [b, s/tp, in]) times this rank's matrix [out/tp, in] (and bias [out/tp]) -> [b, s,
// out/tp]. With tp.overlap_communication (nanotron's tp_linear_async_communication) the
// collective runs beside the GEMMs: REDUCE_SCATTER multiplies this rank's own sequence rows
// while the others' are gathered, and in backward reduce-scatters the input gradient while the
// weight gradient is computed; ALL_REDUCE all-reduces the input gradient during the weight
// gradient's GEMM. Otherwise: at::linear on gather_column_parallel_input(x).
at::Tensor column_parallel_linear(const at::Tensor& x, const at::Tensor& matrix, const at::Tensor& bias,
                                  const TensorParallel& tp);

// Per-token cross-entropy -log softmax(z)[label] over vocabulary-parallel scores z: [tokens,
// vocab/tp] fp32 or fp64 (this rank's columns [vocab_start, vocab_start + vocab/tp)), labels:
// [tokens] int64 global ids. Columns at or beyond vocab_size (padding) take no probability.
// The row max, the sum of exponentials and the label's score are reduced over tp, so no rank
// holds a full-vocabulary row. Backward: (softmax - one_hot) on this rank's columns, times the
// incoming per-token gradient.
at::Tensor vocab_parallel_token_losses(const at::Tensor& scores, const at::Tensor& labels, int64_t vocab_start,
                                       int64_t vocab_size, const TensorParallel& tp);

}  // namespace triax
