// The fused chunk scan's third generation (chunk_scan_v3, ssd_kernels.hpp): chunk_scan's work and
// results (ssd_chunk_scan.cu: same blocks, same steps) on mma.sync m16n8k16 (ssd_chunk_scan_mma.cuh)
// instead of WMMA, with the masked scores never in shared memory. In the WMMA kernel each warp
// wrote its 16 x 64 M into shared memory and read it back as fragments; here each lane computes
// M = exp(decay_i - decay_j) S_ij (0 above the diagonal, rounded to the operand type as before)
// directly in its A fragments' registers, from one float4 of S per row and 16-deep step: the k
// order within a step is permuted (scan_mma::slot_of_column) and the xdt tile's rows are stored in
// that order by cp.async, so ldmatrix.trans reads the B fragments without conflicts or shuffles.
//   1. acc = C_rows . entering^T (C rows as A by ldmatrix, the converted state as B by ldmatrix),
//      each row scaled by exp(decay_i), in the accumulators' registers;
//   2. per causal column tile: the warp's A fragments of M from the scores in registers, the next
//      tile's scores and xdt (cp.async, double buffered) requested, acc += M . xdt;
//   3. acc out to y from the registers (two values a store), the padding after the length dropped.
// The only block barriers are the xdt tiles' (one per column tile) and the state's (after step 1).
// Per output element the same products as chunk_scan, summed in fp32 in another order.
#include "ssd_chunk_scan.cuh"
#include "ssd_chunk_scan_mma.cuh"
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace scan_tiles;  // NOLINT: tile sizes, layouts' pieces and staging of ssd_chunk_scan.cuh
using scan_mma::Tile;

constexpr int kSteps = kRows / 16;  // 16-deep k steps a column tile

// At P <= 64 four blocks an SM (up to 128 registers a thread; shared memory allows five at the 780m
// shape), two at P = 128, whose accumulators alone take 64 registers.
template <int kPFrags>
constexpr int kV3MinBlocks = kPFrags == 8 ? 2 : 4;

// The v3 forward's shared memory: C rows, one xdt tile, the entering state (whose space takes the
// second xdt tile once step 1 is done) and the decays; no M and no fp32 scratch rows.
struct ForwardV3Layout {
  int ld_state, ld_head;  // C, entering: n + pad; xdt: p + pad (rows 16 bytes apart mod 128: no conflicts)
  size_t c, x, entering, decay, total;
};

__host__ __device__ inline ForwardV3Layout forward_v3_layout(int64_t n, int64_t p, int64_t q) {
  ForwardV3Layout s;
  s.ld_state = static_cast<int>(n) + kPad16;
  s.ld_head = static_cast<int>(p) + kPad16;
  const size_t x_tile = round_up_128(2 * static_cast<size_t>(kRows) * s.ld_head);
  size_t at = 0;
  s.c = at, at += round_up_128(2 * static_cast<size_t>(kRows) * s.ld_state);
  s.x = at, at += x_tile;
  s.entering = at, at += larger(round_up_128(2 * static_cast<size_t>(p) * s.ld_state), x_tile);
  s.decay = at, at += round_up_128(4 * static_cast<size_t>(q));
  s.total = at;
  return s;
}

// A lane's scores of one column tile: rows g and g + 8 of its warp, columns 16 step + 4t .. + 3.
struct TileScores {
  float4 row[kSteps][2];
};

// Loads issued for the steps a warp uses (on the diagonal tile, those up to its own rows); lane_rows
// points at the lane's first row, column 4t.
__device__ inline void load_scores(TileScores& into, const float* __restrict__ lane_rows, int q, int j0, int steps) {
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    if (step >= steps) continue;
    const float* at = lane_rows + j0 + 16 * step;
    into.row[step][0] = __ldg(reinterpret_cast<const float4*>(at));
    into.row[step][1] = __ldg(reinterpret_cast<const float4*>(at + 8 * q));
  }
}

// M_ij = exp(decay_i - decay_j) S_ij where i >= j, else 0, rounded to T (as masked_scores does).
__device__ __forceinline__ float masked(float decay_i, float decay_j, float score, bool causal) {
  return causal ? expf(decay_i - decay_j) * score : 0.f;
}

// The lane's A fragment of M for one step: rows i (s[0]) and i + 8 (s[1]), columns j .. j + 3
// (decays_j theirs), in the permuted k order (a[0], a[1]: columns j, j + 1; a[2], a[3]: j + 2, j + 3).
template <typename T>
__device__ inline void masked_fragment(uint32_t (&a)[4], const float4 (&s)[2], float decay_lo, float decay_hi,
                                       float4 decays_j, int i, int j) {
  const int hi = i + 8;
  a[0] = scan_mma::packed<T>(masked(decay_lo, decays_j.x, s[0].x, i >= j), masked(decay_lo, decays_j.y, s[0].y, i > j));
  a[1] =
      scan_mma::packed<T>(masked(decay_hi, decays_j.x, s[1].x, hi >= j), masked(decay_hi, decays_j.y, s[1].y, hi > j));
  a[2] = scan_mma::packed<T>(masked(decay_lo, decays_j.z, s[0].z, i >= j + 2),
                             masked(decay_lo, decays_j.w, s[0].w, i >= j + 3));
  a[3] = scan_mma::packed<T>(masked(decay_hi, decays_j.z, s[1].z, hi >= j + 2),
                             masked(decay_hi, decays_j.w, s[1].w, hi >= j + 3));
}

template <typename T, typename Y, int kPFrags>
__global__ void __launch_bounds__(kThreads, kV3MinBlocks<kPFrags>)
    chunk_scan_v3_kernel(const T* __restrict__ C, const T* __restrict__ xdt, const float* __restrict__ scores,
                         const float* __restrict__ decay, const float* __restrict__ entering, Y* __restrict__ y,
                         ChunkScanShape s) {
  constexpr int p = kPFrags * 16, kTiles = p / 8;
  extern __shared__ __align__(128) unsigned char shared[];
  const ForwardV3Layout layout = forward_v3_layout(s.state, p, s.positions);
  T* c_tile = reinterpret_cast<T*>(shared + layout.c);
  T* entering_tile = reinterpret_cast<T*>(shared + layout.entering);
  T *const x_first = reinterpret_cast<T*>(shared + layout.x), *const x_second = entering_tile;  // once step 1 is done
  float* decays = reinterpret_cast<float*>(shared + layout.decay);

  const int n = static_cast<int>(s.state), q = static_cast<int>(s.positions), r = static_cast<int>(s.heads);
  const int rp = r * p, row_tiles = q / kRows;
  const int i0 = (blockIdx.x % row_tiles) * kRows;     // the tile's first position in the chunk
  const int head = (blockIdx.x / row_tiles) % r;       // within the group
  const int64_t block = blockIdx.x / (row_tiles * r);  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = scan_mma::group_of(lane), t = scan_mma::thread_of(lane);
  const int row0 = warp * 16, i = i0 + row0 + g;  // the lane's first row (the other: i + 8)

  const T* x_head = xdt + block * q * rp + head * p;  // position j's row at j rp
  const float* lane_scores = scores + (block * q + i) * q + 4 * t;

  // Loads in flight together: C rows and the first xdt tile (cp.async), the first column tile's
  // scores (registers), the decays and the entering state.
  copy_rows_async(c_tile, layout.ld_state, C + (block * q + i0) * n, n, kRows, n);
  copy_rows_async(x_first, layout.ld_head, x_head, rp, kRows, p, scan_mma::StepSlot{});
  TileScores tile_scores;
  load_scores(tile_scores, lane_scores, q, 0, i0 == 0 ? warp + 1 : kSteps);
  const float* head_decay = decay + (block * r + head) * q;
  for (int k = threadIdx.x; k < q; k += blockDim.x) decays[k] = head_decay[k];
  load_entering(entering_tile, layout.ld_state, entering + (block * rp + head * p) * n, p, n);
  wait_async_copies();
  __syncthreads();
  const float decay_lo = decays[i], decay_hi = decays[i + 8];

  // 1. The entering state read out, decayed from the chunk's start: the accumulators' start.
  Tile acc[kTiles];
#pragma unroll
  for (int f = 0; f < kTiles; ++f) acc[f] = Tile{{0.f, 0.f, 0.f, 0.f}};
  scan_mma::accumulate_transposed(acc, c_tile + row0 * layout.ld_state, layout.ld_state, entering_tile, layout.ld_state,
                                  n, lane);
  const float scale_lo = expf(decay_lo), scale_hi = expf(decay_hi);
#pragma unroll
  for (int f = 0; f < kTiles; ++f)
    acc[f] = Tile{{acc[f].c[0] * scale_lo, acc[f].c[1] * scale_lo, acc[f].c[2] * scale_hi, acc[f].c[3] * scale_hi}};
  __syncthreads();  // every warp done with the entering state: its space takes xdt tiles now

  // 2. The causal column tiles (the diagonal one last), their xdt in x_first, x_second in turn.
  bool second = false;
  for (int j0 = 0; j0 <= i0; j0 += kRows, second = !second) {
    const bool more = j0 + kRows <= i0;
    const T* const x_tile = second ? x_second : x_first;
    if (more)
      copy_rows_async(second ? x_first : x_second, layout.ld_head, x_head + (j0 + kRows) * rp, rp, kRows, p,
                      scan_mma::StepSlot{});
    // On the diagonal tile the warp's M is zero right of its own 16 columns: those steps skipped.
    const int steps = j0 == i0 ? warp + 1 : kSteps;
    uint32_t a[kSteps][4];
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      if (step >= steps) continue;
      const int j = j0 + 16 * step + 4 * t;
      masked_fragment<T>(a[step], tile_scores.row[step], decay_lo, decay_hi,
                         *reinterpret_cast<const float4*>(decays + j), i, j);
    }
    if (more) load_scores(tile_scores, lane_scores, q, j0 + kRows, j0 + kRows == i0 ? warp + 1 : kSteps);
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      if (step >= steps) continue;
      scan_mma::accumulate_step<T, true>(acc, a[step], x_tile + 16 * step * layout.ld_head, layout.ld_head, lane);
    }
    wait_async_copies();
    __syncthreads();  // the next xdt tile landed; every warp done with this one
  }

  // 3. Out from the registers, the padding after the length dropped.
  const int64_t group = block % s.groups, chunk = (block / s.groups) % s.chunks, batch = block / (s.groups * s.chunks);
  const int64_t heads = s.groups * r, stride = heads * p;
  Y* y_head = y + (batch * s.length * heads + group * r + head) * p;  // position t's row at t heads p
  const int64_t position = chunk * q + i;
  const bool lo_kept = position < s.length, hi_kept = position + 8 < s.length;
#pragma unroll
  for (int f = 0; f < kTiles; ++f) {
    Y* at = y_head + position * stride + 8 * f + 2 * t;
    if (lo_kept) scan_mma::store_pair(at, acc[f].c[0], acc[f].c[1]);
    if (hi_kept) scan_mma::store_pair(at + 8 * stride, acc[f].c[2], acc[f].c[3]);
  }
}

template <typename T, typename Y, int kPFrags>
struct Launch {
  static cudaError_t run(const void* C, const void* xdt, const float* scores, const float* decay, const float* entering,
                         void* y, ChunkScanShape s, cudaStream_t stream) {
    return launch_tiles(chunk_scan_v3_kernel<T, Y, kPFrags>, forward_v3_layout(s.state, s.head_dim, s.positions).total,
                        s, stream, static_cast<const T*>(C), static_cast<const T*>(xdt), scores, decay, entering,
                        static_cast<Y*>(y));
  }
};

}  // namespace

cudaError_t chunk_scan_v3(triax::kernels::Dtype operand, const void* C, const void* xdt, const float* scores,
                          const float* decay, const float* entering, triax::kernels::Dtype y_type, void* y,
                          const ChunkScanShape& shape, cudaStream_t stream) {
  return launch_supported<Launch>(operand, y_type, shape, stream, C, xdt, scores, decay, entering, y);
}

}  // namespace triax::mamba2::kernels
