// The tensor-core pieces of the chunk scan's third generation (ssd_chunk_scan_v3.cu,
// ssd_chunk_scan_columns_v3.cu, ssd_chunk_scan_scores_v3.cu) and of the chunk states' kernels
// (ssd_chunk_states*.cu): mma.sync m16n8k16 on 16-bit operands (bf16 or fp16) with fp32
// accumulation, ldmatrix, a warp's 16-deep step over 8-column tiles, fragments scaled in registers,
// stores from the accumulators, and the order of k within a step that lets a lane build its A
// fragment from one float4 of fp32 scores a row.
//
// Fragment layouts (PTX ISA, mma.m16n8k16), lane = 4 g + t:
//   A 16x16 (row): a[0] row g, k 2t and 2t+1; a[1] row g+8, same k; a[2] row g, k 2t+8 and 2t+9;
//                  a[3] row g+8, k 2t+8 and 2t+9 (two 16-bit values a register, lower k low);
//   B 16x8 (col):  b[0] k 2t and 2t+1, column g; b[1] k 2t+8 and 2t+9, column g;
//   C/D 16x8 fp32: c[0], c[1] row g, columns 2t and 2t+1; c[2], c[3] row g+8, same columns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace triax::mamba2::kernels::scan_mma {

// One 16x8 fp32 accumulator tile in the C/D layout above.
struct Tile {
  float c[4];
};

__device__ __forceinline__ int group_of(int lane) { return lane / 4; }   // g: the rows (A, C) or column (B)
__device__ __forceinline__ int thread_of(int lane) { return lane % 4; }  // t: the k pair (A, B) or column pair (C)

// d += a . b, T (bf16 or fp16) operands, fp32 accumulation.
template <typename T>
__device__ __forceinline__ void mma(Tile& d, const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d.c[0]), "+f"(d.c[1]), "+f"(d.c[2]), "+f"(d.c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __half>, "mma takes bf16 or fp16 operands");
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d.c[0]), "+f"(d.c[1]), "+f"(d.c[2]), "+f"(d.c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#else
  __trap();  // the chunk scan's launchers take sm_80 and later only (chunk_scan_v3 checks)
#endif
}

// Four 8x8 16-bit matrices from shared memory, lane l giving the address of row l % 8 of matrix
// l / 8; r[m] is this lane's part of matrix m: row g, columns 2t and 2t+1 (as stored), or with
// Transposed, rows 2t and 2t+1 of column g (a B fragment from a row-major [k][n] block).
template <bool Transposed>
__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const void* row_address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  if constexpr (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#else
  (void)r, (void)row_address;
  __trap();
#endif
}

// Two fp32 values rounded to T (to nearest even, as from_float rounds) in one register, lo first.
template <typename T>
__device__ __forceinline__ uint32_t packed(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// The two T values of a register (lo first) widened to fp32.
template <typename T>
__device__ __forceinline__ float2 unpacked(uint32_t v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&v));
  }
}

// A register of two T values times lo_scale and hi_scale in fp32, rounded back to T (to nearest
// even): the bits LibTorch's product of the same values stored in T has (xdt o w, weighted_xdt).
template <typename T>
__device__ __forceinline__ uint32_t scaled(uint32_t v, float lo_scale, float hi_scale) {
  const float2 f = unpacked<T>(v);
  return packed<T>(f.x * lo_scale, f.y * hi_scale);
}

// acc[f] += a . b over one 16-deep step for the 8-column tiles first_tile <= f < end_tile (both
// even), b the block at `block` (stride ld, 16-bit values, 16-byte aligned rows): with Transposed a
// row-major [k][n] block (xdt, dy as B), else an [n][k] one (the entering state, dy as B of a
// product with dy^T, xdt as B of dy . xdt^T).
template <typename T, bool Transposed, int kTiles>
__device__ inline void accumulate_step(Tile (&acc)[kTiles], const uint32_t (&a)[4], const T* block, int ld, int lane,
                                       int first_tile = 0, int end_tile = kTiles) {
#pragma unroll
  for (int f = 0; f < kTiles; f += 2) {
    if (f < first_tile || f >= end_tile) continue;
    // Matrices 0, 1: tile f's k 0-7 and 8-15; 2, 3: tile f + 1's.
    const int matrix = lane / 8, row = lane % 8;
    const T* at = Transposed ? block + (8 * (matrix % 2) + row) * ld + 8 * (f + matrix / 2)
                             : block + (8 * (f + matrix / 2) + row) * ld + 8 * (matrix % 2);
    uint32_t b[4];
    load_matrices<Transposed>(b, at);
    mma<T>(acc[f], a, b[0], b[1]);
    mma<T>(acc[f + 1], a, b[2], b[3]);
  }
}

// acc += rows . block^T over k (a multiple of 16): rows the warp's 16 rows [16][k] (stride
// ld_rows), block an [n][k] one (stride ld), both 16-bit values in shared memory.
template <typename T, int kTiles>
__device__ __forceinline__ void accumulate_transposed(Tile (&acc)[kTiles], const T* rows, int ld_rows, const T* block,
                                                      int ld, int k, int lane) {
  for (int kk = 0; kk < k; kk += 16) {
    uint32_t a[4];  // matrices: rows 0-7, 8-15 at k 0-7, then both at k 8-15
    load_matrices<false>(a, rows + (lane % 16) * ld_rows + kk + 8 * (lane / 16));
    accumulate_step<T, false>(acc, a, block + kk, ld, lane);
  }
}

// Two adjacent outputs (columns 2t, 2t + 1 of an accumulator row), rounded to Y (to nearest even,
// as from_float) where Y is 16-bit.
template <typename Y>
__device__ inline void store_pair(Y* at, float lo, float hi) {
  if constexpr (std::is_same_v<Y, float>) {
    *reinterpret_cast<float2*>(at) = make_float2(lo, hi);
  } else {
    *reinterpret_cast<uint32_t*>(at) = packed<Y>(lo, hi);
  }
}

// The k order of a 16-deep step: lane t's A fragment holds k 2t, 2t+1 (a[0], a[1]) and 2t+8, 2t+9
// (a[2], a[3]); taking those from columns 4t .. 4t+3 of its rows makes them one float4 a row.
// The B operand must then hold, at k, the row of column_of_k(k); stored at row slot_of_column(c),
// ldmatrix reads it in the k order without a further permutation.
__host__ __device__ __forceinline__ int slot_of_column(int c) {
  return ((c & 2) << 2) | ((c >> 2) << 1) | (c & 1);  // 4t + e -> 2t + e, 4t + 2 + e -> 8 + 2t + e
}

// A row index (within a tile of whole 16-row steps) to its slot: the step kept, the row within it
// permuted by slot_of_column. copy_rows_async takes it as its row map.
struct StepSlot {
  __device__ int operator()(int row) const { return (row & ~15) | slot_of_column(row & 15); }
};

}  // namespace triax::mamba2::kernels::scan_mma
