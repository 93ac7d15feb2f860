// The vectorised transposing fp8 cast (fp8_cast.cu's scale_to_fp8, fp8_grouped_cast.cu's
// per-group-column cast): a block of 256 threads scales a tile of 128 rows x 64 columns. Thread t
// reads 4 rows x 8 columns (rows 4 * (t / 8) + i, columns 8 * (t % 8) + k): each row of the tile is
// one 128-byte read by 8 neighbouring threads. The 4 bytes a thread makes per column (4
// consecutive rows) form one word of the transposed tile in shared memory; each transposed row
// (128 bytes) is then stored by 8 threads in 16-byte pieces of 16 rows. Words are placed at index
// word ^ swizzle(column), so that neither the word stores nor the 16-byte loads of shared memory
// meet in one bank.
//
// Where the rows come from, their multipliers and where the bytes go is the Tiles policy's:
//   const T* row(int64_t r)                              the 16-byte aligned row r
//   void multipliers(int64_t r, int64_t c, float (&m)[8]) the multipliers of x[r, c .. c + 8)
//   uint8_t* row_major(int64_t r)                        where row r's bytes go (8-byte aligned), or null
//   uint8_t* transposed(int64_t c, int64_t r)            where column c's rows r .. r + 16 go (16-byte aligned)
//   int64_t rows, cols                                   rows % 16 == 0, cols % 8 == 0
#pragma once

#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels::fp8_tiles {

constexpr int kTileRows = 128, kTileCols = 64, kThreads = 256;
constexpr int kWordsPerColumn = kTileRows / 4;

// XOR on the word index's bits 2-4: a group of 4 words (16 bytes) stays together and in order.
__device__ __forceinline__ int swizzled(int word, int column) { return word ^ (((column / 8) % 8) * 4); }

// The 8 elements at p (16-byte aligned) in fp32.
template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&v)[8]) {
  load_floats<T, 8>(p, v);
}

template <typename T, typename F, typename Tiles>
__global__ void __launch_bounds__(kThreads) scale_to_fp8_tiles_kernel(const Tiles tiles) {
  __shared__ __align__(16) uint32_t tile[kTileCols][kWordsPerColumn];
  const int t = threadIdx.x, group = t % 8, word = t / 8;
  const int64_t rows = tiles.rows, cols = tiles.cols;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTileCols, c = c0 + group * 8;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTileRows; r0 < rows;
       r0 += static_cast<int64_t>(gridDim.y) * kTileRows) {
    uint32_t words[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = r0 + word * 4 + i;
      if (r >= rows || c >= cols) continue;
      float v[8], m[8];
      load8(tiles.row(r) + c, v);
      tiles.multipliers(r, c, m);
      Pack<uint8_t, 8> q;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        q.v[k] = F(v[k] * m[k]).__x;
        words[k] |= static_cast<uint32_t>(q.v[k]) << (8 * i);
      }
      if (uint8_t* out = tiles.row_major(r)) store_pack<uint8_t, 8>(out + c, q);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) tile[group * 8 + k][swizzled(word, group * 8 + k)] = words[k];
    __syncthreads();
    // Transposed row (column c0 + column) of 128 bytes: 8 pieces of 16 (4 words), one per thread.
#pragma unroll
    for (int pass = 0; pass < kTileCols / (kThreads / 8); ++pass) {
      const int column = t / 8 + pass * (kThreads / 8), piece = t % 8;
      const int64_t r = r0 + piece * 16;
      if (c0 + column < cols && r < rows)
        *reinterpret_cast<uint4*>(tiles.transposed(c0 + column, r)) =
            *reinterpret_cast<const uint4*>(&tile[column][swizzled(piece * 4, column)]);
    }
    __syncthreads();
  }
}

// The grid of tiles over `tiles` (rows capped at gridDim.y's limit: the kernel strides over them).
template <typename Tiles>
dim3 grid_of(const Tiles& tiles) {
  constexpr int64_t kMaxRowBlocks = 65535;
  return dim3(static_cast<unsigned>((tiles.cols + kTileCols - 1) / kTileCols),
              static_cast<unsigned>(std::min<int64_t>((tiles.rows + kTileRows - 1) / kTileRows, kMaxRowBlocks)));
}

}  // namespace triax::kernels::fp8_tiles
