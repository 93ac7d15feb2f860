// The fused chunk scan backward's scores kernel, third generation (chunk_scan_scores_v3,
// ssd_kernels.hpp): chunk_scan_scores' results (ssd_chunk_scan_scores.cu: one block per (batch,
// chunk, group, row tile i, column tile j), walking the group's heads in their order) on mma.sync
// (ssd_chunk_scan_mma.cuh), with dM never in shared memory. The WMMA kernel stored each head's
// dM = dy_i . xdt_j^T into fp32 scratch rows and read it back to mask it; here each warp (16 rows i)
// keeps dM in its accumulators and adds dM L, L = exp(decay_i - decay_j) (i >= j), to dS in registers:
//   per head: dM = dy_i . xdt_j^T over p (dy rows as A by ldmatrix, xdt rows as B by ldmatrix, the
//   [n][k] block form), then dS += dM L in the same fixed order of heads (the same bits each run).
// Off the diagonal tile L is taken as exp(decay_i - decay_c) exp(decay_c - decay_j), c the column
// tile's last position (j <= c < i): 4 exps a lane a head instead of 32, the exps being what
// bounds this kernel as much as its products. The decays move one way along a chunk (dt >= 0), so
// each factor lies between 1 and L: neither overflows unless L does.
// The next head's dy and xdt tiles and decays come by cp.async into a second copy of the buffers
// meanwhile; one block barrier a head. dS goes out from the registers in the operand type, two
// values a store; tiles above the diagonal are written as zeros. The same products per output as
// the WMMA kernel, summed in fp32 in another order within each head's dM. Offsets within a block
// are int32 (chunk_scan_supports bounds them); the block's bases int64.
#include "ssd_chunk_scan.cuh"
#include "ssd_chunk_scan_mma.cuh"
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace scan_tiles;  // NOLINT: tile sizes, layouts' pieces and staging of ssd_chunk_scan.cuh
using scan_mma::Tile;

constexpr int kColumnTiles8 = kRows / 8;  // a column tile's positions j as 8-wide accumulator tiles

// dS and one head's dM take 64 accumulator registers. At P <= 64 five blocks an SM (39 KB of shared
// memory each; ptxas fits 88 registers without spills), three at P = 128, whose shared memory
// (72 KB) allows three.
template <int kPFrags>
constexpr int kScoresV3MinBlocks = kPFrags == 8 ? 3 : 5;

// The shared memory: two copies (the next head's while this one's are read) of what a head brings,
// the dy and xdt tiles and the tile's row and column decays, copy k at k * stage bytes further;
// then each warp's column factors exp(decay_c - decay_j) of the head.
struct ScoresV3Layout {
  int ld_head;  // p + pad: rows 16 bytes apart mod 128, no ldmatrix conflicts
  size_t dy, x, row_decays, column_decays, stage, factors, total;
};

__host__ __device__ inline ScoresV3Layout scores_v3_layout(int64_t p) {
  ScoresV3Layout s;
  s.ld_head = static_cast<int>(p) + kPad16;
  const size_t tile = round_up_128(2 * static_cast<size_t>(kRows) * s.ld_head);
  size_t at = 0;
  s.dy = at, at += tile;
  s.x = at, at += tile;
  s.row_decays = at, at += round_up_128(4 * static_cast<size_t>(kRows));
  s.column_decays = at, at += round_up_128(4 * static_cast<size_t>(kRows));
  s.stage = at;
  s.factors = 2 * s.stage;
  s.total = s.factors + round_up_128(4 * static_cast<size_t>(kWarps) * kRows);
  return s;
}

// sum[f] += d_masked[f] exp(decay_i - decay_j) where i >= j (no exp above the diagonal, where it
// could overflow), for the lane's rows i (c[0], c[1]) and i + 8 (c[2], c[3]) and columns
// j0 + 8 f + 2t + e; tiles f >= end_tile are zero (right of the warp's rows on the diagonal tile).
__device__ inline void add_decayed(Tile (&sum)[kColumnTiles8], const Tile (&d_masked)[kColumnTiles8],
                                   const float* column_decays, float decay_lo, float decay_hi, int i, int j0, int t,
                                   int end_tile) {
#pragma unroll
  for (int f = 0; f < kColumnTiles8; ++f) {
    if (f >= end_tile) continue;
    const float2 decays_j = *reinterpret_cast<const float2*>(column_decays + 8 * f + 2 * t);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int j = j0 + 8 * f + 2 * t + e;
      const float decay_j = e == 0 ? decays_j.x : decays_j.y;
      if (i >= j) sum[f].c[e] += d_masked[f].c[e] * expf(decay_lo - decay_j);
      if (i + 8 >= j) sum[f].c[2 + e] += d_masked[f].c[2 + e] * expf(decay_hi - decay_j);
    }
  }
}

// Off the diagonal tile (every i > j): sum[f] += d_masked[f] (row factor) (column factor), the
// lane's rows i (row_lo) and i + 8 (row_hi), columns 8 f + 2t + e (column_factors, the warp's).
__device__ inline void add_factored(Tile (&sum)[kColumnTiles8], const Tile (&d_masked)[kColumnTiles8],
                                    const float* column_factors, float row_lo, float row_hi, int t) {
#pragma unroll
  for (int f = 0; f < kColumnTiles8; ++f) {
    const float2 column = *reinterpret_cast<const float2*>(column_factors + 8 * f + 2 * t);
    sum[f].c[0] += d_masked[f].c[0] * (row_lo * column.x);
    sum[f].c[1] += d_masked[f].c[1] * (row_lo * column.y);
    sum[f].c[2] += d_masked[f].c[2] * (row_hi * column.x);
    sum[f].c[3] += d_masked[f].c[3] * (row_hi * column.y);
  }
}

template <typename T, int kPFrags>
__global__ void __launch_bounds__(kThreads, kScoresV3MinBlocks<kPFrags>)
    chunk_scan_scores_v3_kernel(const T* __restrict__ xdt, const T* __restrict__ dy, const float* __restrict__ decay,
                                T* __restrict__ d_scores, ChunkScanShape s) {
  constexpr int p = kPFrags * 16;
  extern __shared__ __align__(128) unsigned char shared[];
  const ScoresV3Layout layout = scores_v3_layout(p);
  const int q = static_cast<int>(s.positions), r = static_cast<int>(s.heads), rp = r * p;
  const int tiles = q / kRows;
  const int i0 = (blockIdx.x % tiles) * kRows, j0 = ((blockIdx.x / tiles) % tiles) * kRows;
  const int64_t block = blockIdx.x / (tiles * tiles);  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = scan_mma::group_of(lane), t = scan_mma::thread_of(lane);
  const int row0 = warp * 16, i = i0 + row0 + g;  // the lane's first row (the other: i + 8)

  Tile sum[kColumnTiles8];  // dS of the warp's 16 rows
#pragma unroll
  for (int f = 0; f < kColumnTiles8; ++f) sum[f] = Tile{{0.f, 0.f, 0.f, 0.f}};

  if (j0 <= i0) {  // tiles above the diagonal stay zero (a uniform branch: the block's barriers hold)
    const T* dy_rows = dy + (block * q + i0) * rp;  // head h's tile at h p, stride rp
    const T* x_rows = xdt + (block * q + j0) * rp;
    const float* head_decays = decay + block * r * q;  // head h's at h q
    // What head `head` brings, into copy `second` of the buffers (cp.async: wait, then a barrier).
    auto stage = [&](int head, bool second) {
      stage_scores_head(shared + (second ? layout.stage : 0), layout, dy_rows, x_rows, head_decays, head, p, q, rp, i0,
                        j0);
    };
    // On the diagonal tile the warp's dS is zero right of its own 16 columns: those tiles skipped.
    const bool diagonal = j0 == i0;
    const int end_tile = diagonal ? 2 * warp + 2 : kColumnTiles8;
    float* column_factors = reinterpret_cast<float*>(shared + layout.factors) + warp * kRows;
    stage(0, false);
    wait_async_copies();
    __syncthreads();
    bool second = false;
    for (int head = 0; head < r; ++head, second = !second) {
      if (head + 1 < r) stage(head + 1, !second);
      const unsigned char* at = shared + (second ? layout.stage : 0);
      const T* dy_tile = reinterpret_cast<const T*>(at + layout.dy);
      const T* x_tile = reinterpret_cast<const T*>(at + layout.x);
      const float* row_decays = reinterpret_cast<const float*>(at + layout.row_decays);
      const float* column_decays = reinterpret_cast<const float*>(at + layout.column_decays);
      float row_lo = 0.f, row_hi = 0.f;  // off the diagonal: exp(decay_i - decay_c), rows i and i + 8
      if (!diagonal) {
        const float last = column_decays[kRows - 1];
        column_factors[lane] = expf(last - column_decays[lane]);
        column_factors[lane + 32] = expf(last - column_decays[lane + 32]);
        row_lo = expf(row_decays[row0 + g] - last), row_hi = expf(row_decays[row0 + g + 8] - last);
        __syncwarp();  // the warp's factors visible to its lanes (the last head's were read before the barrier)
      }

      Tile d_masked[kColumnTiles8];  // dM = dy_i . xdt_j^T
#pragma unroll
      for (int f = 0; f < kColumnTiles8; ++f) d_masked[f] = Tile{{0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int kk = 0; kk < kPFrags; ++kk) {
        uint32_t a[4];  // matrices: rows 0-7, 8-15 at k 0-7, then both at k 8-15
        scan_mma::load_matrices<false>(a, dy_tile + (row0 + lane % 16) * layout.ld_head + 16 * kk + 8 * (lane / 16));
        scan_mma::accumulate_step<T, false>(d_masked, a, x_tile + 16 * kk, layout.ld_head, lane, 0, end_tile);
      }
      if (diagonal)
        add_decayed(sum, d_masked, column_decays, row_decays[row0 + g], row_decays[row0 + g + 8], i, j0, t, end_tile);
      else
        add_factored(sum, d_masked, column_factors, row_lo, row_hi, t);
      wait_async_copies();
      __syncthreads();  // the next head's tiles landed; every warp done with this head's
    }
  }

  T* lane_row = d_scores + (block * q + i) * q + j0 + 2 * t;
#pragma unroll
  for (int f = 0; f < kColumnTiles8; ++f) {
    scan_mma::store_pair(lane_row + 8 * f, sum[f].c[0], sum[f].c[1]);
    scan_mma::store_pair(lane_row + 8 * q + 8 * f, sum[f].c[2], sum[f].c[3]);
  }
}

template <typename T, typename /* no y */, int kPFrags>
struct LaunchScores {
  static cudaError_t run(const void* xdt, const void* dy, const float* decay, void* d_scores, ChunkScanShape s,
                         cudaStream_t stream) {
    const int64_t tiles = s.positions / kRows;
    return launch_blocks(chunk_scan_scores_v3_kernel<T, kPFrags>, scores_v3_layout(s.head_dim).total,
                         s.batch * s.chunks * s.groups * tiles * tiles, s, stream, static_cast<const T*>(xdt),
                         static_cast<const T*>(dy), decay, static_cast<T*>(d_scores));
  }
};

}  // namespace

cudaError_t chunk_scan_scores_v3(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* decay,
                                 void* d_scores, const ChunkScanShape& shape, cudaStream_t stream) {
  return launch_supported<LaunchScores>(operand, operand, shape, stream, xdt, dy, decay, d_scores);
}

}  // namespace triax::mamba2::kernels
