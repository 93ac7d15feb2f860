// The CUDA kernels of the chunked SSD's intra-chunk step (ssd_cuda.hpp), callable without
// LibTorch: raw pointers, the caller's stream. Shapes per ssd_chunks.hpp, with the batch, chunk
// and group dimensions flattened into `blocks` = b c g, r heads a group, q positions a chunk.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "triax/kernels/kernels.hpp"

namespace triax::mamba2::kernels {

struct ChunkShape {
  int64_t blocks, heads, positions;  // b c g, r, q
};

// out[., h, i, j] = exp(decay[., h, i] - decay[., h, j]) scores[., i, j] for i >= j, else 0, in
// `operand` (the next product's operand type). decay [blocks, r, q], scores [blocks, q, q] fp32.
cudaError_t masked_scores(triax::kernels::Dtype operand, const float* decay, const float* scores, void* out,
                          const ChunkShape& shape, cudaStream_t stream);

// Columns a tile of the backward (one warp's width): row_partials has q / kScoreTile of them.
constexpr int64_t kScoreTile = 32;

// The backward through masked_scores, from d_masked [blocks, r, q, q] fp32 (dy xdt^T per head):
//   dscores[., i, j] = sum over heads of d_masked L (in `operand`; 0 above the diagonal),
//   with G = d_masked L scores, the decay's gradient is sum_j G_hij - sum_j G_hji:
//   row_partials [blocks, r, q, ceil(q / kScoreTile)] (zeroed by the caller) hold the row sums
//   tile by tile, column_sums [blocks, r, q] the column sums.
cudaError_t masked_scores_backward(triax::kernels::Dtype operand, const float* d_masked, const float* decay,
                                   const float* scores, void* dscores, float* row_partials, float* column_sums,
                                   const ChunkShape& shape, cudaStream_t stream);

}  // namespace triax::mamba2::kernels
