// The 128 x 64 tiles that write an fp8 tensor and its transpose from one read (fp8_cast.cu's
// scaling kernel, swiglu_fp8.cu's gradient): a block of 256 threads covers 128 rows x 64 columns.
// Thread t handles 4 rows x 8 columns (rows 4 * (t / 8) + i, columns 8 * (t % 8) + k): each row of
// the tile is one 128-byte read by 8 neighbouring threads. The 4 bytes a thread makes per column
// (4 consecutive rows) form one word of the transposed tile in shared memory; each transposed row
// (128 bytes) is then stored by 8 threads in 16-byte pieces. Words are placed at index
// word ^ swizzle(column), so that neither the word stores nor the 16-byte loads of shared memory
// meet in one bank.
#pragma once

#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels::fp8_tiles {

constexpr int kTileRows = 128, kTileCols = 64, kThreads = 256;
constexpr int kWordsPerColumn = kTileRows / 4;

// A tile transposed in shared memory: kTileCols rows of kWordsPerColumn words.
using TransposedTile = uint32_t[kTileCols][kWordsPerColumn];

// XOR on the word index's bits 2-4: a group of 4 words (16 bytes) stays together and in order.
__device__ __forceinline__ int swizzled(int word, int column) { return word ^ (((column / 8) % 8) * 4); }

// The 8 elements at p (16-byte aligned) in fp32.
template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&v)[8]) {
  constexpr int N = kVectorWidth<T>;
#pragma unroll
  for (int part = 0; part < 8 / N; ++part) {
    const Pack<T, N> in = load_pack<T, N>(p + part * N);
#pragma unroll
    for (int k = 0; k < N; ++k) v[part * N + k] = to_float(in.v[k]);
  }
}

// Thread t's 8 words (one per column, its 4 rows' bytes) into the tile.
__device__ __forceinline__ void stage_words(TransposedTile& tile, const uint32_t (&words)[8], int t) {
  const int group = t % 8, word = t / 8;
#pragma unroll
  for (int k = 0; k < 8; ++k) tile[group * 8 + k][swizzled(word, group * 8 + k)] = words[k];
}

// The staged tile (after a __syncthreads) into out_t [cols, rows] at rows r0.., columns c0..:
// transposed row c0 + column, 128 bytes in 8 pieces of 16 (4 words), one per thread.
__device__ __forceinline__ void store_transposed(const TransposedTile& tile, uint8_t* __restrict__ out_t, int64_t r0,
                                                 int64_t c0, int64_t rows, int64_t cols, int t) {
#pragma unroll
  for (int pass = 0; pass < kTileCols / (kThreads / 8); ++pass) {
    const int column = t / 8 + pass * (kThreads / 8), piece = t % 8;
    const int64_t r = r0 + piece * 16;
    if (c0 + column < cols && r < rows)
      *reinterpret_cast<uint4*>(out_t + (c0 + column) * rows + r) =
          *reinterpret_cast<const uint4*>(&tile[column][swizzled(piece * 4, column)]);
  }
}

}  // namespace triax::kernels::fp8_tiles
