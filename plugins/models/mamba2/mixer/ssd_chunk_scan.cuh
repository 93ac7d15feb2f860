// What the chunk scan's kernels (ssd_chunk_scan.cu, ssd_chunk_scan_backward.cu) share: the WMMA
// fragments (16x16x16, 16-bit operands, fp32 accumulation), the row tile, the staging of 16-bit
// rows into shared memory, and a warp's products of shared-memory blocks: into its accumulators,
// or out into its fp32 scratch rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ssd_kernels.hpp"

namespace triax::mamba2::kernels::scan_tiles {

namespace wmma = nvcuda::wmma;

constexpr int kRows = static_cast<int>(kChunkScanRows);  // a tile's positions
constexpr int kWarps = kRows / 16;                        // one 16-row stripe each
constexpr int kThreads = kWarps * 32;
// The most dynamic shared memory a block asks for: within an A100's 163 KiB and an H100's 227 KiB.
constexpr size_t kMaxSharedBytes = 160 * 1024;
// Row padding in shared memory, so that a fragment's 16 rows fall on different banks; the
// padded strides stay multiples of 16 bytes, as WMMA and the vector copies need.
constexpr int kPad16 = 8, kPad32 = 4;

template <typename T>
using FragmentA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T, typename Layout>
using FragmentB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, Layout>;
using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__host__ __device__ inline size_t round_up_128(size_t bytes) { return (bytes + 127) / 128 * 128; }

// rows x cols 16-bit values from global (row stride ld_src) into shared (ld_dst), 16 bytes a
// thread at a time: cols, ld_src and ld_dst multiples of 8, both bases 16-byte aligned.
template <typename T>
__device__ inline void copy_rows(T* dst, int ld_dst, const T* __restrict__ src, int64_t ld_src, int rows, int cols) {
  const int vectors = cols / 8;
  for (int k = threadIdx.x; k < rows * vectors; k += blockDim.x) {
    const int row = k / vectors, v = k % vectors;
    *reinterpret_cast<uint4*>(dst + row * ld_dst + v * 8) =
        *reinterpret_cast<const uint4*>(src + row * ld_src + v * 8);
  }
}

// acc[f] (f < kPFrags, the 16-column blocks of p) += rows . cols^T over k, both rows in shared
// memory with stride ld: rows [16][k], cols [16 kPFrags][k] (read as a column-major k x 16 block).
template <typename T, int kFrags>
__device__ inline void product_transposed(Accumulator (&acc)[kFrags], const T* rows, const T* cols, int ld, int64_t k) {
  for (int64_t kk = 0; kk < k; kk += 16) {
    FragmentA<T> a;
    wmma::load_matrix_sync(a, rows + kk, ld);
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      FragmentB<T, wmma::col_major> b;
      wmma::load_matrix_sync(b, cols + f * 16 * ld + kk, ld);
      wmma::mma_sync(acc[f], a, b, acc[f]);
    }
  }
}

// The warp's accumulators acc[f] (16 rows, 16 kFrags columns) into its fp32 rows at scratch
// (stride ld), then a warp barrier, so that any lane may read any of them.
template <int kFrags>
__device__ inline void store_rows(float* scratch, int ld, const Accumulator (&acc)[kFrags]) {
#pragma unroll
  for (int f = 0; f < kFrags; ++f) wmma::store_matrix_sync(scratch + f * 16, acc[f], ld, wmma::mem_row_major);
  __syncwarp();
}

// acc = rows . cols^T over k (as in product_transposed, from zero), stored into the warp's fp32
// rows at scratch (16 rows x 16 kFrags columns, stride ld_scratch). The caller owns the fragments:
// with fragments of the helper's own, the fp16 forward at P = 16 spilled more registers.
template <typename T, int kFrags>
__device__ inline void product_transposed_rows(Accumulator (&acc)[kFrags], float* scratch, int ld_scratch,
                                               const T* rows, const T* cols, int ld, int64_t k) {
#pragma unroll
  for (int f = 0; f < kFrags; ++f) wmma::fill_fragment(acc[f], 0.f);
  product_transposed<T, kFrags>(acc, rows, cols, ld, k);
  store_rows(scratch, ld_scratch, acc);
}

// acc[f] += a[:, k_begin:k_end] . b[k_begin:k_end, 16 f:16 f + 16] in 16-deep steps, a the warp's
// 16 rows (stride ld_a; ALayout col_major: a is read as the transpose of a row-major block, its k
// running down the rows) and b row-major (stride ld_b), both in shared memory.
template <typename T, typename ALayout, int kFrags>
__device__ inline void accumulate_product(Accumulator (&acc)[kFrags], const T* a, int ld_a, const T* b, int ld_b,
                                          int k_begin, int k_end) {
  for (int kk = k_begin; kk < k_end; kk += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, ALayout> fa;
    wmma::load_matrix_sync(fa, a + (std::is_same_v<ALayout, wmma::row_major> ? kk : kk * ld_a), ld_a);
#pragma unroll
    for (int f = 0; f < kFrags; ++f) {
      FragmentB<T, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, b + kk * ld_b + f * 16, ld_b);
      wmma::mma_sync(acc[f], fa, fb, acc[f]);
    }
  }
}

}  // namespace triax::mamba2::kernels::scan_tiles
