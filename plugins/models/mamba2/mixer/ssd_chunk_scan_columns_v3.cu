// The fused chunk scan backward's columns kernel, third generation (chunk_scan_columns_v3,
// ssd_kernels.hpp): chunk_scan_columns' results (ssd_chunk_scan_columns.cu: one block per (batch,
// chunk, group, head, tile of 64 columns j), walking the row tiles i >= j) on mma.sync
// (ssd_chunk_scan_mma.cuh), with M and G never in shared memory. Each warp owns 16 columns j of
// the tile for the whole walk (the WMMA kernel gave each warp 16 rows i, then shared M through
// shared memory for its columns' product). Per row tile:
//   1. dM^T = xdt_j . dy_i^T (16 x 64, fp32) in accumulators, the warp's xdt rows as A fragments
//      held from the start, dy by ldmatrix;
//   2. from dM^T and S^T (the lane's S_ij in registers, loaded before the previous tile's products):
//      M^T (rounded to the operand type, as the forward rounds it) straight into A fragments (an
//      accumulator pair's layout is an A fragment's), and G^T = dM L S: its sums over j (row
//      partials: over the lane's two columns, the warp's eight groups by shuffles, the warps through
//      shared memory) and over i (the column sums: in registers to the end);
//   3. d_xdt_j += M^T . dy (dy by ldmatrix.trans), kept in accumulators to the end.
// The next row tile's dy comes by cp.async into a second buffer meanwhile; one block barrier a tile
// (the dy buffers and the row partials, double buffered). The same products per output as the WMMA
// kernel, summed in fp32 in another order. Offsets within a block are int32; the block's bases int64.
#include "ssd_chunk_scan.cuh"
#include "ssd_chunk_scan_mma.cuh"
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace scan_tiles;  // NOLINT: tile sizes, layouts' pieces and staging of ssd_chunk_scan.cuh
using scan_mma::Tile;

constexpr int kRowTiles8 = kRows / 8;  // a row tile's positions i as 8-wide accumulator tiles
constexpr int kSteps = kRows / 16;     // ... and as 16-deep k steps of M^T . dy

template <int kPFrags>
constexpr int kColumnsV3MinBlocks = kPFrags == 8 ? 1 : 3;

// The shared memory: the xdt tile, two dy tiles, two sets of the warps' row partials, the decays.
struct ColumnsV3Layout {
  int ld_head;  // p + pad: rows 16 bytes apart mod 128, no ldmatrix conflicts
  size_t x, dy, partials, decay, total;
};

__host__ __device__ inline ColumnsV3Layout columns_v3_layout(int64_t p, int64_t q) {
  ColumnsV3Layout s;
  s.ld_head = static_cast<int>(p) + kPad16;
  const size_t tile = round_up_128(2 * static_cast<size_t>(kRows) * s.ld_head);
  size_t at = 0;
  s.x = at, at += tile;
  s.dy = at, at += 2 * tile;
  s.partials = at, at += round_up_128(4 * 2 * static_cast<size_t>(kWarps) * kRows);
  s.decay = at, at += round_up_128(4 * static_cast<size_t>(q));
  s.total = at;
  return s;
}

// A lane's S_ij of a row tile: columns j (h 0) and j + 8 (h 1) of its warp, rows i0 + 8 f + 2t + e,
// as its accumulators of dM^T hold them. Tiles f below first_tile (on the diagonal tile, rows above
// the warp's columns) are not loaded: never used.
struct TransposedScores {
  float v[kRowTiles8][2][2];  // [f][h][e]
};

__device__ inline void load_transposed_scores(TransposedScores& into, const float* __restrict__ column, int q, int i0,
                                              int t, int first_tile) {
#pragma unroll
  for (int f = 0; f < kRowTiles8; ++f) {
    if (f < first_tile) continue;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float* at = column + (i0 + 8 * f + 2 * t + e) * q;
      into.v[f][0][e] = __ldg(at);
      into.v[f][1][e] = __ldg(at + 8);
    }
  }
}

// The warp's sum over lanes of the same t (its eight groups g: its 16 columns, each lane's two
// already added), on every lane.
__device__ __forceinline__ float sum_over_groups(float v) {
#pragma unroll
  for (int mask = 4; mask < 32; mask *= 2) v += __shfl_xor_sync(0xffffffffu, v, mask);
  return v;
}

template <typename T, int kPFrags>
__global__ void __launch_bounds__(kThreads, kColumnsV3MinBlocks<kPFrags>)
    chunk_scan_columns_v3_kernel(const T* __restrict__ xdt, const T* __restrict__ dy, const float* __restrict__ scores,
                                 const float* __restrict__ decay, float* __restrict__ d_xdt,
                                 float* __restrict__ row_partials, float* __restrict__ column_sums, ChunkScanShape s) {
  constexpr int p = kPFrags * 16, kPTiles = p / 8;
  extern __shared__ __align__(128) unsigned char shared[];
  const ColumnsV3Layout layout = columns_v3_layout(p, s.positions);
  T* x_tile = reinterpret_cast<T*>(shared + layout.x);
  T *const dy_first = reinterpret_cast<T*>(shared + layout.dy), *const dy_second = dy_first + kRows * layout.ld_head;
  float* partials = reinterpret_cast<float*>(shared + layout.partials);  // [2][kWarps][kRows]
  float* decays = reinterpret_cast<float*>(shared + layout.decay);

  const int q = static_cast<int>(s.positions), r = static_cast<int>(s.heads), rp = r * p;
  const int tiles = q / kRows;
  const int column_tile = blockIdx.x % tiles, j0 = column_tile * kRows;
  const int head = (blockIdx.x / tiles) % r;       // within the group
  const int64_t block = blockIdx.x / (tiles * r);  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = scan_mma::group_of(lane), t = scan_mma::thread_of(lane);
  const int row0 = warp * 16, j = j0 + row0 + g;  // the lane's first column (the other: j + 8)

  const T* dy_head = dy + block * q * rp + head * p;  // position i's row at i rp
  const T* x_head = xdt + block * q * rp + head * p;
  const float* lane_column = scores + block * q * q + j;  // S_ij at lane_column[i q]
  const int64_t head_row = (block * r + head) * q;        // the head's decays, partials and sums

  // Loads in flight together: the xdt tile and first dy tile (cp.async), the first row tile's
  // scores (registers), the decays. On the diagonal tile the warp's M^T is zero below its own
  // columns' rows: 8-wide tiles f < 2 warp skipped.
  copy_rows_async(x_tile, layout.ld_head, x_head + j0 * rp, rp, kRows, p);
  copy_rows_async(dy_first, layout.ld_head, dy_head + j0 * rp, rp, kRows, p);
  TransposedScores tile_scores;
  load_transposed_scores(tile_scores, lane_column, q, j0, t, 2 * warp);
  for (int k = threadIdx.x; k < q; k += blockDim.x) decays[k] = decay[head_row + k];
  wait_async_copies();
  __syncthreads();
  const float decay_lo = decays[j], decay_hi = decays[j + 8];

  // The warp's 16 xdt rows as A fragments over p, for every row tile.
  uint32_t x_rows[kPFrags][4];
#pragma unroll
  for (int kk = 0; kk < kPFrags; ++kk)
    scan_mma::load_matrices<false>(x_rows[kk],
                                   x_tile + (row0 + lane % 16) * layout.ld_head + 16 * kk + 8 * (lane / 16));

  Tile acc[kPTiles];  // d_xdt of the warp's 16 columns
#pragma unroll
  for (int f = 0; f < kPTiles; ++f) acc[f] = Tile{{0.f, 0.f, 0.f, 0.f}};
  float column_lo = 0.f, column_hi = 0.f;  // G's sums over i of columns j, j + 8: this lane's share

  bool second = false;
  for (int i0 = j0; i0 < q; i0 += kRows, second = !second) {
    const bool more = i0 + kRows < q;
    if (more) copy_rows_async(second ? dy_first : dy_second, layout.ld_head, dy_head + (i0 + kRows) * rp, rp, kRows, p);
    const T* dy_tile = second ? dy_second : dy_first;
    const int first_tile = i0 == j0 ? 2 * warp : 0;

    // 1. dM^T = xdt_j . dy_i^T.
    Tile d_masked[kRowTiles8];
#pragma unroll
    for (int f = 0; f < kRowTiles8; ++f) d_masked[f] = Tile{{0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < kPFrags; ++kk)
      scan_mma::accumulate_step<T, false>(d_masked, x_rows[kk], dy_tile + 16 * kk, layout.ld_head, lane, first_tile);

    // 2. M^T into A fragments (step k: tiles 2k, 2k + 1), G^T's sums.
    uint32_t masked[kSteps][4];
    float* own_partials = partials + (second ? kWarps * kRows : 0) + warp * kRows;
#pragma unroll
    for (int f = 0; f < kRowTiles8; ++f) {
      float m[2][2] = {{0.f, 0.f}, {0.f, 0.f}}, row_sum[2] = {0.f, 0.f};  // [h][e], [e]
      if (f >= first_tile) {
        const float2 decays_i = *reinterpret_cast<const float2*>(decays + i0 + 8 * f + 2 * t);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = i0 + 8 * f + 2 * t + e;
          const float decay_i = e == 0 ? decays_i.x : decays_i.y;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if (i < j + 8 * h) continue;  // above the diagonal: M and G zero (no exp, which could overflow)
            const MaskedAndGradient mg = masked_and_gradient(decay_i, h == 0 ? decay_lo : decay_hi,
                                                             tile_scores.v[f][h][e], d_masked[f].c[2 * h + e]);
            m[h][e] = mg.m;
            row_sum[e] += mg.g;
            (h == 0 ? column_lo : column_hi) += mg.g;
          }
        }
      }
      masked[f / 2][2 * (f % 2)] = scan_mma::packed<T>(m[0][0], m[0][1]);
      masked[f / 2][2 * (f % 2) + 1] = scan_mma::packed<T>(m[1][0], m[1][1]);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float total = sum_over_groups(row_sum[e]);
        if (g == 0) own_partials[8 * f + 2 * t + e] = total;
      }
    }
    if (more) load_transposed_scores(tile_scores, lane_column, q, i0 + kRows, t, 0);

    // 3. d_xdt_j += M^T . dy_i over the tile's 16-deep steps (on the diagonal, from the warp's own).
    const int first_step = first_tile / 2;
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      if (step < first_step) continue;
      scan_mma::accumulate_step<T, true>(acc, masked[step], dy_tile + 16 * step * layout.ld_head, layout.ld_head, lane);
    }
    wait_async_copies();
    __syncthreads();  // the next dy tile landed; every warp done with this one, its row partials written

    // The tile's row partials: the warps' sums added in their order.
    const float* tile_partials = partials + (second ? kWarps * kRows : 0);
    for (int k = threadIdx.x; k < kRows; k += blockDim.x) {
      float total = 0.f;
      for (int w = 0; w < kWarps; ++w) total += tile_partials[w * kRows + k];
      row_partials[(head_row + i0 + k) * tiles + column_tile] = total;
    }
  }

  // Out: the column sums (over the four lanes of a group) and d_xdt from the accumulators.
#pragma unroll
  for (int mask = 1; mask < 4; mask *= 2) {
    column_lo += __shfl_xor_sync(0xffffffffu, column_lo, mask);
    column_hi += __shfl_xor_sync(0xffffffffu, column_hi, mask);
  }
  if (t == 0) column_sums[head_row + j] = column_lo, column_sums[head_row + j + 8] = column_hi;
  float* d_xdt_lo = d_xdt + (block * q + j) * rp + head * p + 2 * t;
#pragma unroll
  for (int f = 0; f < kPTiles; ++f) {
    scan_mma::store_pair(d_xdt_lo + 8 * f, acc[f].c[0], acc[f].c[1]);
    scan_mma::store_pair(d_xdt_lo + 8 * rp + 8 * f, acc[f].c[2], acc[f].c[3]);
  }
}

template <typename T, typename /* no y */, int kPFrags>
struct LaunchColumns {
  static cudaError_t run(const void* xdt, const void* dy, const float* scores, const float* decay, float* d_xdt,
                         float* row_partials, float* column_sums, ChunkScanShape s, cudaStream_t stream) {
    return launch_tiles(chunk_scan_columns_v3_kernel<T, kPFrags>, columns_v3_layout(s.head_dim, s.positions).total, s,
                        stream, static_cast<const T*>(xdt), static_cast<const T*>(dy), scores, decay, d_xdt,
                        row_partials, column_sums);
  }
};

}  // namespace

cudaError_t chunk_scan_columns_v3(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* scores,
                                  const float* decay, float* d_xdt, float* row_partials, float* column_sums,
                                  const ChunkScanShape& shape, cudaStream_t stream) {
  return launch_supported<LaunchColumns>(operand, operand, shape, stream, xdt, dy, scores, decay, d_xdt, row_partials,
                                         column_sums);
}

}  // namespace triax::mamba2::kernels
