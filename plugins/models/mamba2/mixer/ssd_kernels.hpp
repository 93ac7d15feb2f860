// The CUDA kernels of the chunked SSD (ssd_cuda.hpp): the intra-chunk mask and the state passing
// across chunks, callable without LibTorch: raw pointers, the caller's stream. Shapes per
// ssd_chunks.hpp; the mask's flatten the batch, chunk and group dimensions into `blocks` = b c g.
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

// The states across chunks, one thread per state value walking the chunks in order. Per batch
// row: states and entering [c, H, p n] (each chunk's own final state; the state entering it),
// chunk_decay [c, H] (the log-decay over each chunk), initial and final [H, p n] (initial may be
// null: zeros). All fp32.
struct PassingShape {
  int64_t batch, chunks, heads, values;  // b, c, H, p n
};
cudaError_t pass_states(const float* states, const float* chunk_decay, const float* initial, float* entering,
                        float* final_state, const PassingShape& shape, cudaStream_t stream);

// Values a block of the backward covers: chunk_decay_partials has ceil(p n / kPassingSlice) of them.
constexpr int64_t kPassingSlice = 256;

// The backward, chunks in reverse: from the gradients of the entering states [b, c, H, p n] and
// of the final state [b, H, p n] (may be null: zeros), those of the chunk states [b, c, H, p n],
// of the initial state [b, H, p n] and, in partial sums [b, c, H, ceil(p n / kPassingSlice)], of
// the chunk decays. entering: the forward's.
cudaError_t pass_states_backward(const float* entering, const float* chunk_decay, const float* d_entering,
                                 const float* d_final, float* d_states, float* d_initial,
                                 float* chunk_decay_partials, const PassingShape& shape, cudaStream_t stream);

}  // namespace triax::mamba2::kernels
