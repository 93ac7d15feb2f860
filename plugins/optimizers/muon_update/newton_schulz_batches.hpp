// Many matrices through the Newton–Schulz iteration in few launches: those with the same
// iteration shape (a tall matrix iterates transposed, so an out×in matrix and an in×out one share
// a batch) are stacked and iterated together, at most kMaxBatchBytes at a time so that the stacked
// copy stays small beside the model. Each matrix keeps its own normalisation, so its result is
// the one orthogonalise() gives it alone.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "newton_schulz.hpp"

namespace triax::plugins {

// The stacked matrices of one batch, in the iteration's dtype: 1 GiB. The iteration holds about
// three times this while it runs (X, the next X, and the smaller Gram matrices), so a batch costs at
// most a few GiB at the optimizer step, when the activations are gone; at 1.7b (bf16) one batch
// holds 128 of the 2048 x 2048 matrices or 32 of the 2048 x 8192 ones, enough to keep each
// product's kernel busy.
inline constexpr int64_t kMaxBatchBytes = int64_t{1} << 30;

// Which of `shapes` (each [count, rows, cols]) are orthogonalised together: lists of indices into
// `shapes`, every list's matrices of one iteration shape (min(rows, cols) x max(rows, cols)) and,
// unless one entry alone is larger, at most `max_bytes` in `element_bytes` per element. The same
// shapes give the same batches on every rank.
std::vector<std::vector<size_t>> newton_schulz_batches(const std::vector<std::vector<int64_t>>& shapes,
                                                       int64_t element_bytes, int64_t max_bytes);

// Each of `matrices` ([count, rows, cols] each, any mix of shapes) orthogonalised as
// orthogonalise() does it alone, through batches of newton_schulz_batches(); the results in
// `compute`, shaped as their inputs.
std::vector<at::Tensor> orthogonalise_all(const std::vector<at::Tensor>& matrices,
                                          const NewtonSchulzCoefficients& coefficients, int64_t steps,
                                          at::ScalarType compute, int64_t max_bytes = kMaxBatchBytes);

}  // namespace triax::plugins
