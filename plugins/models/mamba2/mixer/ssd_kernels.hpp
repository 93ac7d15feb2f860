// The CUDA kernels of the chunked SSD (ssd_cuda.hpp): the intra-chunk mask, the state passing
// across chunks and the fused chunk scan (the forward's output in one kernel), callable without LibTorch: raw pointers, the caller's stream. Shapes per
// ssd_chunks.hpp; the mask's flatten the batch, chunk and group dimensions into `blocks` = b c g.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
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
// null: zeros). All fp32; entering_operand (may be null) [b, c, H, p n] the entering states once
// more, rounded to `operand` (the products' type, bf16 or fp16), as a cast of entering would.
struct PassingShape {
  int64_t batch, chunks, heads, values;  // b, c, H, p n
};
cudaError_t pass_states(const float* states, const float* chunk_decay, const float* initial, float* entering,
                        float* final_state, triax::kernels::Dtype operand, void* entering_operand,
                        const PassingShape& shape, cudaStream_t stream);

// Values a block of the backward covers: chunk_decay_partials has ceil(p n / kPassingSlice) of them.
constexpr int64_t kPassingSlice = 256;

// The backward, chunks in reverse: from the gradients of the entering states [b, c, H, p n] and
// of the final state [b, H, p n] (may be null: zeros), those of the chunk states [b, c, H, p n],
// of the initial state [b, H, p n] and, in partial sums [b, c, H, ceil(p n / kPassingSlice)], of
// the chunk decays. entering: the forward's. d_states in d_states_type (fp32, or the operand type
// its product reads: rounded once as it is stored, as a cast would); the rest fp32.
cudaError_t pass_states_backward(const float* entering, const float* chunk_decay, const float* d_entering,
                                 const float* d_final, triax::kernels::Dtype d_states_type, void* d_states,
                                 float* d_initial, float* chunk_decay_partials, const PassingShape& shape,
                                 cudaStream_t stream);

// The fused chunk scan (ssd_chunk_scan.cu): the forward's output from the chunks' operands in one
// kernel on tensor cores, per (batch, chunk, group, head, tile of kChunkScanRows positions):
//   y_i = exp(decay_i) C_i . entering^T + sum_{j <= i} exp(decay_i - decay_j) S_ij xdt_j,
// the masked scores kept in shared memory (rounded to the operand type, as masked_scores does).
// Operands (bf16 or fp16, contiguous, 16-byte aligned): C [b, c, g, q, n], xdt [b, c, g, q, r p];
// fp32, contiguous and 16-byte aligned: scores S = C B^T [b, c, g, q, q] (the group's, shared by
// its heads), decay [b, c, g, r, q], entering [b, c, g, r p, n]; y [b, l, g r, p] contiguous and
// 16-byte aligned, of y_type: fp32, or the operand type (the fp32 accumulators rounded once, as
// they are stored), the positions past the length l not written.
struct ChunkScanShape {
  int64_t batch, chunks, groups, heads, head_dim, state, positions, length;  // b, c, g, r, p, n, q, l
};

constexpr int64_t kChunkScanRows = 64;

// Whether the kernels (forward and backward) take `shape`: q a multiple of kChunkScanRows, n a
// positive multiple of 16, p one of 16, 32, 64, 128, the offsets within a (batch, chunk, group)
// within int32 (q q, q r p and r p n), and the shared memory they need within what one block may
// have.
bool chunk_scan_supports(const ChunkScanShape& shape);

cudaError_t chunk_scan(triax::kernels::Dtype operand, const void* C, const void* xdt, const float* scores,
                       const float* decay, const float* entering, triax::kernels::Dtype y_type, void* y,
                       const ChunkScanShape& shape, cudaStream_t stream);

// The fused chunk scan's third generation (ssd_chunk_scan_v3.cu): chunk_scan's arguments, shapes
// and results on mma.sync (sm_80 on), the masked scores computed in the A fragments' registers
// (no shared-memory round trip, no block barrier for them). M rounded to the operand type as
// chunk_scan rounds it; the same products per output, summed in fp32 in another order.
cudaError_t chunk_scan_v3(triax::kernels::Dtype operand, const void* C, const void* xdt, const float* scores,
                          const float* decay, const float* entering, triax::kernels::Dtype y_type, void* y,
                          const ChunkScanShape& shape, cudaStream_t stream);

// The backward through the intra-chunk term in two kernels, from dy position-major [b, c, g, q, r p]
// in the operand type (xdt, scores and decay as chunk_scan takes them); with M = L o S the
// forward's masked scores (rounded to the operand type), dM = dy xdt^T and G = dM L S per head.
// chunk_scan_columns (ssd_chunk_scan_columns.cu):
//   d_xdt [b, c, g, q, r p] fp32: M^T dy per head;
//   row_partials [b, c, g, r, q, q / kChunkScanRows] (zeroed by the caller: the tiles above the
//   diagonal stay zero) and column_sums [b, c, g, r, q]: the decays' gradient is the row sums
//   of G minus its column sums.
// chunk_scan_scores (ssd_chunk_scan_scores.cu):
//   d_scores [b, c, g, q, q] in the operand type: dS = sum over the group's heads of dM L.
cudaError_t chunk_scan_columns(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* scores,
                               const float* decay, float* d_xdt, float* row_partials, float* column_sums,
                               const ChunkScanShape& shape, cudaStream_t stream);
// chunk_scan_columns_v3 (ssd_chunk_scan_columns_v3.cu): chunk_scan_columns' arguments and results
// on mma.sync (sm_80 on), M and G in registers (each warp owning 16 columns j), no M in shared
// memory; the same products per output, summed in fp32 in another order.
cudaError_t chunk_scan_columns_v3(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* scores,
                                  const float* decay, float* d_xdt, float* row_partials, float* column_sums,
                                  const ChunkScanShape& shape, cudaStream_t stream);
cudaError_t chunk_scan_scores(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* decay,
                              void* d_scores, const ChunkScanShape& shape, cudaStream_t stream);
// chunk_scan_scores_v3 (ssd_chunk_scan_scores_v3.cu): chunk_scan_scores' arguments and results on
// mma.sync (sm_80 on), dM and dS in registers (no fp32 scratch rows, less shared memory), the heads
// in the same order; the same products per output, summed in fp32 in another order within a head.
cudaError_t chunk_scan_scores_v3(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* decay,
                                 void* d_scores, const ChunkScanShape& shape, cudaStream_t stream);

// The dynamic shared memory the scores kernel asks for (chunk_scan_supports bounds it).
size_t chunk_scan_scores_shared_bytes(const ChunkScanShape& shape);

}  // namespace triax::mamba2::kernels
