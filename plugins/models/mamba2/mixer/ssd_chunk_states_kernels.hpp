// The chunk states on tensor cores (ssd_chunk_states.cu, ssd_chunk_states_backward.cu): each
// chunk's own final state and its backward straight from xdt, the weights w and B, the weighted
// copy xdt o w never stored. Each A fragment of xdt is scaled by w in registers and rounded back to
// the operand type, the bits weighted_xdt stores, so the kernels take the products the cuBLAS path
// takes and sum them in fp32 in another order. mma.sync m16n8k16 (ssd_chunk_scan_mma.cuh), sm_80 on.
// Raw pointers, the caller's stream; no LibTorch header.
//
// Operands (bf16 or fp16, contiguous, 16-byte aligned): xdt [b, c, g, q, r p], B [b, c, g, q, n],
// d_states [b, c, g, r p, n]; fp32 contiguous: to_end = w [b, c, g, r, q] (the decay from each
// position to its chunk's end). Shapes as ChunkScanShape (ssd_kernels.hpp; length unused: the
// chunks' padding holds zeros).
#pragma once

#include <cuda_runtime.h>

#include "ssd_kernels.hpp"
#include "triax/kernels/kernels.hpp"

namespace triax::mamba2::kernels {

// Whether the three kernels take `shape`: p 64 or 128, n 64 or 128, q a positive multiple of 64,
// the offsets within a (batch, chunk, group) within int32 and their shared memory within
// scan_tiles::kMaxSharedBytes.
bool chunk_states_supports(const ChunkScanShape& shape);

// states[., h p, :] = sum_t (xdt[., t, h p] w[., h, t] in T) B[., t, :], fp32 [b, c, g, r p, n].
cudaError_t chunk_states_mma(triax::kernels::Dtype operand, const void* xdt, const float* to_end, const void* B,
                             float* states, const ChunkScanShape& shape, cudaStream_t stream);

// The backward's terms of xdt and w, with dweighted = B d_states^T per head ([q, p], in registers):
//   d_xdt[., t, h p] += dweighted w[., h, t]                 (fp32 [b, c, g, q, r p], in place)
//   d_to_end[., h, t] = w[., h, t] sum_p dweighted xdt        (fp32 [b, c, g, r, q])
// (the cuBLAS path's product, then chunk_states_terms, in one kernel).
cudaError_t chunk_states_backward_xdt(triax::kernels::Dtype operand, const void* B, const void* d_states,
                                      const void* xdt, const float* to_end, float* d_xdt, float* d_to_end,
                                      const ChunkScanShape& shape, cudaStream_t stream);

// The backward's term of B: d_B[., t, :] = sum over the group's heads h and channels p of
// (xdt[., t, h p] w[., h, t] in T) d_states[., h p, :], fp32 [b, c, g, q, n]; the heads in order.
cudaError_t chunk_states_backward_B(triax::kernels::Dtype operand, const void* xdt, const float* to_end,
                                    const void* d_states, float* d_B, const ChunkScanShape& shape, cudaStream_t stream);

}  // namespace triax::mamba2::kernels
