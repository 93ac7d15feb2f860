// What the chunk scan's kernels (ssd_chunk_scan.cu, ssd_chunk_scan_v3.cu, ssd_chunk_scan_columns.cu,
// ssd_chunk_scan_scores.cu) share: the WMMA fragments (16x16x16, 16-bit operands, fp32
// accumulation), the row tile, the shared-memory layouts, the staging of rows (cp.async) and of the
// entering state into shared memory, the backward mask's arithmetic, and a warp's products of
// shared-memory blocks: into its accumulators, or out into its fp32 scratch rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ssd_kernels.hpp"
#include "triax/kernels/async_copy.cuh"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels::scan_tiles {

namespace wmma = nvcuda::wmma;

constexpr int kRows = static_cast<int>(kChunkScanRows);  // a tile's positions
constexpr int kWarps = kRows / 16;                       // one 16-row stripe each
constexpr int kThreads = kWarps * 32;
// The most dynamic shared memory a block asks for: within an A100's 163 KiB and an H100's 227 KiB.
constexpr size_t kMaxSharedBytes = 160 * 1024;
// Row padding in shared memory, so that a fragment's 16 rows fall on different banks; the
// padded strides stay multiples of 16 bytes, as WMMA and the vector copies need.
constexpr int kPad16 = 8, kPad32 = 4;

// The forward's and columns kernel's __launch_bounds__ minimum of blocks an SM: 3 (as their shared
// memory allows at P = 64),
// which leaves ptxas up to 168 registers; 1 at P = 128, whose shared memory fits one block anyway.
// Without it ptxas picked fewer registers for some P and spilled.
template <int kPFrags>
constexpr int kMinBlocks = kPFrags == 8 ? 1 : 3;

template <typename T>
using FragmentA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T, typename Layout>
using FragmentB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, Layout>;
using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__host__ __device__ inline size_t round_up_128(size_t bytes) { return (bytes + 127) / 128 * 128; }
__host__ __device__ inline size_t larger(size_t a, size_t b) { return a > b ? a : b; }

// The forward's shared memory: byte offsets (128-aligned, as WMMA's 32-byte pointers need) and
// padded row strides in elements. The entering state's space is large enough for an xdt tile too:
// the next column tile is loaded there once the state has been read out.
struct ForwardLayout {
  int ld_state, ld_head, ld_tile, ld_scratch;  // C, entering: n + pad; xdt, fp32: p + pad; M: 64 + pad
  size_t c, x, entering, masked, scratch, decay, total;
};

__host__ __device__ inline ForwardLayout forward_layout(int64_t n, int64_t p, int64_t q) {
  ForwardLayout s;
  s.ld_state = static_cast<int>(n) + kPad16;
  s.ld_head = static_cast<int>(p) + kPad16;
  s.ld_tile = kRows + kPad16;
  s.ld_scratch = static_cast<int>(p) + kPad32;
  const size_t x_tile = round_up_128(2 * static_cast<size_t>(kRows) * s.ld_head);
  size_t at = 0;
  s.c = at, at += round_up_128(2 * static_cast<size_t>(kRows) * s.ld_state);
  s.x = at, at += x_tile;
  s.entering = at, at += larger(round_up_128(2 * static_cast<size_t>(p) * s.ld_state), x_tile);
  s.masked = at, at += round_up_128(2 * static_cast<size_t>(kRows) * s.ld_tile);
  s.scratch = at, at += round_up_128(4 * static_cast<size_t>(kRows) * s.ld_scratch);
  s.decay = at, at += round_up_128(4 * static_cast<size_t>(q));
  s.total = at;
  return s;
}

// The backward's columns kernel's shared memory. Its fp32 scratch rows (used at the end only) are
// larger than a dy tile: the next row tile's dy is loaded there.
struct ColumnsLayout {
  int ld_head, ld_tile, ld_scratch;  // dy, xdt: p + pad; M: 64 + pad; fp32: max(64, p) + pad
  size_t dy, x, masked, scratch, d_masked, decay, columns, total;
};

__host__ __device__ inline ColumnsLayout columns_layout(int64_t p, int64_t q) {
  ColumnsLayout s;
  s.ld_head = static_cast<int>(p) + kPad16;
  s.ld_tile = kRows + kPad16;
  s.ld_scratch = static_cast<int>(p > kRows ? p : kRows) + kPad32;
  size_t at = 0;
  s.dy = at, at += round_up_128(2 * static_cast<size_t>(kRows) * s.ld_head);
  s.x = at, at += round_up_128(2 * static_cast<size_t>(kRows) * s.ld_head);
  s.masked = at, at += round_up_128(2 * static_cast<size_t>(kRows) * s.ld_tile);
  s.scratch = at, at += round_up_128(4 * static_cast<size_t>(kRows) * s.ld_scratch);
  s.d_masked = at, at += round_up_128(4 * static_cast<size_t>(kRows) * s.ld_scratch);
  s.decay = at, at += round_up_128(4 * static_cast<size_t>(q));
  s.columns = at, at += round_up_128(4 * static_cast<size_t>(kWarps) * kRows);
  s.total = at;
  return s;
}

// The backward's scores kernel's shared memory: its fp32 scratch rows, then two copies (the next
// head's while this one's are used) of what a head brings: the dy and xdt tiles and the tile's row
// and column decays, copy k at k * stage bytes further.
struct ScoresLayout {
  int ld_head, ld_scratch;
  size_t scratch, dy, x, row_decays, column_decays, stage, total;
};

__host__ __device__ inline ScoresLayout scores_layout(int64_t p) {
  constexpr size_t kStages = 2;
  ScoresLayout s;
  s.ld_head = static_cast<int>(p) + kPad16;
  s.ld_scratch = kRows + kPad32;
  size_t at = 0;
  s.scratch = at, at += round_up_128(4 * static_cast<size_t>(kRows) * s.ld_scratch);
  const size_t first = at;
  s.dy = at, at += round_up_128(2 * static_cast<size_t>(kRows) * s.ld_head);
  s.x = at, at += round_up_128(2 * static_cast<size_t>(kRows) * s.ld_head);
  s.row_decays = at, at += round_up_128(4 * static_cast<size_t>(kRows));
  s.column_decays = at, at += round_up_128(4 * static_cast<size_t>(kRows));
  s.stage = at - first;
  s.total = first + kStages * s.stage;
  return s;
}

// kernel<<<blocks, kThreads, shared bytes>>>(args..., s).
template <typename Kernel, typename... Args>
cudaError_t launch_blocks(Kernel kernel, size_t shared, int64_t blocks, const ChunkScanShape& s, cudaStream_t stream,
                          Args... args) {
  const cudaError_t allowed = triax::kernels::allow_dynamic_shared_memory(kernel, shared);
  if (allowed != cudaSuccess) return allowed;
  kernel<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(args..., s);
  return cudaGetLastError();
}

// kernel<<<one block per (batch, chunk, group, head, tile of kRows), kThreads, shared bytes>>>(args..., s).
template <typename Kernel, typename... Args>
cudaError_t launch_tiles(Kernel kernel, size_t shared, const ChunkScanShape& s, cudaStream_t stream, Args... args) {
  const int64_t blocks = s.batch * s.chunks * s.groups * s.heads * (s.positions / kRows);
  return launch_blocks(kernel, shared, blocks, s, stream, args...);
}

// A kernel's launch for `operand` (bf16, fp16), y_type (fp32 or the operand type) and head_dim
// (16, 32, 64, 128): Launch<T, Y, kPFrags>::run(args...), kPFrags = head_dim / 16. Each forward
// (ssd_chunk_scan.cu, ssd_chunk_scan_v3.cu) brings its Launch; a kernel with no y (the columns
// kernels) passes y_type = operand and ignores Y.
template <template <typename, typename, int> class Launch, typename T, typename Y, typename... Args>
cudaError_t launch_for_head_dim(int64_t head_dim, Args... args) {
  switch (head_dim) {
    case 16:
      return Launch<T, Y, 1>::run(args...);
    case 32:
      return Launch<T, Y, 2>::run(args...);
    case 64:
      return Launch<T, Y, 4>::run(args...);
    case 128:
      return Launch<T, Y, 8>::run(args...);
    default:
      return cudaErrorInvalidValue;
  }
}

template <template <typename, typename, int> class Launch, typename T, typename... Args>
cudaError_t launch_for_y_type(triax::kernels::Dtype operand, triax::kernels::Dtype y_type, int64_t head_dim,
                              Args... args) {
  if (y_type == triax::kernels::Dtype::Float32) return launch_for_head_dim<Launch, T, float>(head_dim, args...);
  if (y_type == operand) return launch_for_head_dim<Launch, T, T>(head_dim, args...);
  return cudaErrorInvalidValue;
}

template <template <typename, typename, int> class Launch, typename... Args>
cudaError_t launch_for_types(triax::kernels::Dtype operand, triax::kernels::Dtype y_type, int64_t head_dim,
                             Args... args) {
  switch (operand) {
    case triax::kernels::Dtype::BFloat16:
      return launch_for_y_type<Launch, __nv_bfloat16>(operand, y_type, head_dim, args...);
    case triax::kernels::Dtype::Float16:
      return launch_for_y_type<Launch, __half>(operand, y_type, head_dim, args...);
    default:
      return cudaErrorInvalidValue;  // the tensor cores take 16-bit operands only here
  }
}

// A chunk scan kernel's entry point: a shape chunk_scan_supports refuses is invalid, an empty one
// done, else launch_for_types<Launch>(operand, y_type, head_dim, args..., shape, stream).
template <template <typename, typename, int> class Launch, typename... Args>
cudaError_t launch_supported(triax::kernels::Dtype operand, triax::kernels::Dtype y_type, const ChunkScanShape& shape,
                             cudaStream_t stream, Args... args) {
  if (!chunk_scan_supports(shape)) return cudaErrorInvalidValue;
  if (shape.batch * shape.chunks * shape.groups == 0) return cudaSuccess;
  return launch_for_types<Launch>(operand, y_type, shape.head_dim, args..., shape, stream);
}

// The backward's M_ij and G_ij = dM_ij L_ij S_ij for i >= j.
struct MaskedAndGradient {
  float m, g;
};
__device__ __forceinline__ MaskedAndGradient masked_and_gradient(float decay_i, float decay_j, float score,
                                                                 float d_masked) {
  const float mask = expf(decay_i - decay_j);
  return {mask * score, d_masked * mask * score};
}

// Row i of the columns kernel's M and G over the column tile at j0, each lane owning columns
// lane and lane + 32 (its own_columns entries): M into masked_row in the operand type, G added to
// own_columns, G's row sum returned on every lane. score(half) gives S at column j0 + lane + 32
// half (asked only where i >= j: no exp above the diagonal, where it could overflow).
template <typename T, typename Score>
__device__ inline float masked_and_gradient_row(T* masked_row, const float* d_masked_row, float* own_columns,
                                                const float* decays, int64_t i, int64_t j0, Score score) {
  const int lane = threadIdx.x % 32;
  float row_sum = 0.f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int col = lane + 32 * half;
    const int64_t j = j0 + col;
    float m = 0.f, g = 0.f;
    if (i >= j) {
      const MaskedAndGradient mg = masked_and_gradient(decays[i], decays[j], score(half), d_masked_row[col]);
      m = mg.m, g = mg.g;
    }
    masked_row[col] = triax::kernels::from_float<T>(m);
    row_sum += g;
    own_columns[col] += g;
  }
  return triax::kernels::warp_reduce(row_sum, triax::kernels::SumOp{});
}

// The scores kernel's dS rows: sum[row][half] (the warp's 16 rows i_first + row, lane's columns
// j0 + lane + 32 half) += dM (the warp's fp32 scratch rows) exp(row_decays[row] - column_decays[col])
// where i >= j: one head's term, added in the heads' order.
__device__ inline void add_decayed_rows(float (&sum)[16][2], const float* scratch, int ld_scratch,
                                        const float* row_decays, const float* column_decays, int64_t i_first,
                                        int64_t j0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int row = 0; row < 16; ++row) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int col = lane + 32 * half;
      if (i_first + row >= j0 + col)
        sum[row][half] += scratch[row * ld_scratch + col] * expf(row_decays[row] - column_decays[col]);
    }
  }
}

// The warp's dS rows out to rows (stride ld) in the operand type.
template <typename T>
__device__ inline void write_score_rows(T* rows, int64_t ld, const float (&sum)[16][2]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int row = 0; row < 16; ++row)
#pragma unroll
    for (int half = 0; half < 2; ++half)
      rows[row * ld + lane + 32 * half] = triax::kernels::from_float<T>(sum[row][half]);
}

// rows x cols values from global (row stride ld_src) into shared (ld_dst), 16 bytes a thread at a
// time, as cp.async (sm_80 on; plain copies before): the loads fly while the block computes, and
// nothing waits for them until wait_async_copies() (then a barrier, before reading). Any T
// (16-byte vectors: 8 16-bit values, 4 floats); cols, ld_src and ld_dst whole vectors, both bases
// 16-byte aligned. Source row r lands in row row_of(r) of dst (the same row unless asked).
struct SameRow {
  __device__ int operator()(int row) const { return row; }
};
template <typename T, typename RowOf = SameRow>
__device__ inline void copy_rows_async(T* dst, int ld_dst, const T* __restrict__ src, int ld_src, int rows, int cols,
                                       RowOf row_of = {}) {
  constexpr int kPerVector = 16 / sizeof(T);
  const int vectors = cols / kPerVector;
  for (int k = threadIdx.x; k < rows * vectors; k += blockDim.x) {
    const int row = k / vectors, v = k % vectors;
    T* to = dst + row_of(row) * ld_dst + v * kPerVector;
    const T* from = src + row * ld_src + v * kPerVector;
    triax::kernels::copy16_async(to, from);
  }
}

// A scores kernel's (ssd_chunk_scan_scores{,_v3}.cu) tiles of head `head` into the buffers at `at`
// of `layout`: dy's rows from dy_rows and xdt's from x_rows (head h's at h p, stride rp), the row
// tile's decays (from i0) and the column tile's (from j0) of head_decays (head h's at h q). As
// copy_rows_async: wait, then a barrier, before reading.
template <typename T, typename Layout>
__device__ inline void stage_scores_head(unsigned char* at, const Layout& layout, const T* dy_rows, const T* x_rows,
                                         const float* head_decays, int head, int p, int q, int rp, int i0, int j0) {
  copy_rows_async(reinterpret_cast<T*>(at + layout.dy), layout.ld_head, dy_rows + head * p, rp, kRows, p);
  copy_rows_async(reinterpret_cast<T*>(at + layout.x), layout.ld_head, x_rows + head * p, rp, kRows, p);
  copy_rows_async(reinterpret_cast<float*>(at + layout.row_decays), kRows, head_decays + head * q + i0, q, 1, kRows);
  copy_rows_async(reinterpret_cast<float*>(at + layout.column_decays), kRows, head_decays + head * q + j0, q, 1, kRows);
}

// The head's entering state [p][n] fp32 into shared memory (stride ld) in the operand type (as
// read_out rounds it): 16-byte loads, four in flight a thread, int32 indices.
template <typename T>
__device__ inline void load_entering(T* into, int ld, const float* __restrict__ state, int p, int n) {
  constexpr int kInFlight = 4;
  const int vectors_per_row = n / 4, vectors = p * vectors_per_row;
  for (int first = threadIdx.x; first < vectors; first += kInFlight * blockDim.x) {
    float4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int k = first + u * blockDim.x;
      if (k < vectors) v[u] = __ldg(reinterpret_cast<const float4*>(state) + k);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int k = first + u * blockDim.x;
      if (k >= vectors) continue;
      using triax::kernels::from_float;
      const triax::kernels::Pack<T, 4> out{
          {from_float<T>(v[u].x), from_float<T>(v[u].y), from_float<T>(v[u].z), from_float<T>(v[u].w)}};
      triax::kernels::store_pack(into + (k / vectors_per_row) * ld + (k % vectors_per_row) * 4, out);
    }
  }
}

// This thread's cp.async copies landed (a barrier after it makes everyone's visible).
using triax::kernels::wait_async_copies;

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

// The forward's step 1 for a warp: acc = C_rows . entering^T (entering [p][n] in shared memory,
// stride ld), each row scaled by exp(its decay), through the warp's fp32 scratch rows.
template <typename T, int kPFrags>
__device__ inline void read_out_entering(Accumulator (&acc)[kPFrags], float* scratch, int ld_scratch, const T* c_rows,
                                         const T* entering, int ld, int64_t n, const float* row_decays) {
  constexpr int p = kPFrags * 16;
  const int lane = threadIdx.x % 32;
  product_transposed_rows<T, kPFrags>(acc, scratch, ld_scratch, c_rows, entering, ld, n);
  for (int k = lane; k < 16 * p; k += 32) scratch[(k / p) * ld_scratch + k % p] *= expf(row_decays[k / p]);
  __syncwarp();
#pragma unroll
  for (int f = 0; f < kPFrags; ++f) wmma::load_matrix_sync(acc[f], scratch + f * 16, ld_scratch, wmma::mem_row_major);
}

// The columns kernel's end: the warp's d_xdt (acc, 16 rows) out through its scratch rows to rows
// d_xdt (stride ld_out), then, after a barrier, the tile's column sums of G over the warps
// (columns [kWarps][kRows] in shared memory) to out_columns.
template <int kPFrags>
__device__ inline void write_column_outputs(float* scratch, int ld_scratch, const Accumulator (&acc)[kPFrags],
                                            float* d_xdt, int64_t ld_out, const float* columns, float* out_columns) {
  constexpr int p = kPFrags * 16;
  store_rows(scratch, ld_scratch, acc);
  for (int k = threadIdx.x % 32; k < 16 * p; k += 32) {
    const int row = k / p, col = k % p;
    d_xdt[row * ld_out + col] = scratch[row * ld_scratch + col];
  }
  __syncthreads();
  for (int col = threadIdx.x; col < kRows; col += blockDim.x) {
    float total = 0.f;
    for (int w = 0; w < kWarps; ++w) total += columns[w * kRows + col];
    out_columns[col] = total;
  }
}

}  // namespace triax::mamba2::kernels::scan_tiles
