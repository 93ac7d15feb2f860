// The fused chunk scan (ssd_kernels.hpp): the SSD forward's output on tensor cores (WMMA 16x16x16,
// bf16 or fp16 operands, fp32 accumulation), without the [b, c, g, r, q, q] masked scores the
// LibTorch composition writes to global memory. One block of four warps per (batch, chunk,
// group, head, tile of 64 rows); each warp owns 16 rows of the tile and keeps their p outputs in
// accumulator fragments from start to end:
//   1. acc = C_rows . entering^T, scaled row by row by exp(decay_i) (the entering state read out);
//   2. for each 64-column tile j0 <= i0 of the chunk (causal: later tiles are masked out):
//        M = exp(decay_i - decay_j) S_ij for i >= j else 0, S the group's scores C B^T (read from
//        global memory: one cuBLAS product per group, shared by its heads), rounded to the
//        operand type (as masked_scores rounds it), acc += M . xdt_tile;
//   3. acc written to y in [b, l, H, p] order, the padding after the length dropped: in fp32, or
//      rounded once to the operand type (half the bytes for the gated norm to read and keep).
// The loads are kept off the critical path (an earlier version that waited on each, with the same
// bits, made the SSD's forward 2.94 ms where this one makes it 1.34 ms, 780m shape, one H100):
//   - the entering state comes in 16-byte loads, four in flight a thread, int32 indices;
//   - the C rows and the first xdt tile arrive by cp.async while the state is converted (to the
//     operand type, as read_out rounds it);
//   - the next column tile's xdt is loaded by cp.async (double buffering, the second buffer in the
//     entering state's space, free after step 1) while this tile's mask and products run;
//   - each warp holds its 16 score rows of the next column tile in registers (8 16-byte loads a
//     lane, issued before this tile's products), so the mask waits on no global load;
//   - y goes out in 16-byte stores (4 fp32 or 8 16-bit values), M and the converted state go into
//     shared memory 8 bytes a store.
// Offsets within a block are int32 (chunk_scan_supports bounds them); the block's bases int64.
#include "ssd_chunk_scan.cuh"
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace scan_tiles;  // NOLINT: the fragments, tile sizes and helpers of ssd_chunk_scan.cuh
using triax::kernels::from_float;

// A warp's 16 x 64 fp32 scores of a column tile in 16-byte vectors, 8 a lane: vector v of lane
// covers row 2 v + lane / 16, columns 4 (lane % 16) to 4 (lane % 16) + 3.
constexpr int kScoreVectors = 16 * kRows / 4 / 32;

__device__ inline int score_row(int v, int lane) { return 2 * v + lane / 16; }
__device__ inline int score_column(int lane) { return 4 * (lane % 16); }

// rows: the warp's first score row (stride q); all loads issued before any is used.
__device__ inline void load_scores(float4 (&into)[kScoreVectors], const float* __restrict__ rows, int q, int j0,
                                   int lane) {
#pragma unroll
  for (int v = 0; v < kScoreVectors; ++v)
    into[v] = __ldg(reinterpret_cast<const float4*>(rows + score_row(v, lane) * q + j0 + score_column(lane)));
}

// The warp's M rows (i from i_first) of the column tile at j0, from the scores in registers.
template <typename T>
__device__ inline void mask_scores(T* masked, int ld, const float4 (&scores)[kScoreVectors], const float* decays,
                                   int i_first, int j0, int lane) {
#pragma unroll
  for (int v = 0; v < kScoreVectors; ++v) {
    const int row = score_row(v, lane), col = score_column(lane), i = i_first + row;
    const float s[4] = {scores[v].x, scores[v].y, scores[v].z, scores[v].w};
    triax::kernels::Pack<T, 4> out;  // one 8-byte shared store
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = j0 + col + e;
      // The composition's mask, rounded as masked_scores rounds it.
      out.v[e] = from_float<T>(i >= j ? expf(decays[i] - decays[j]) * s[e] : 0.f);
    }
    triax::kernels::store_pack(masked + row * ld + col, out);
  }
}

// The warp's 16 rows of y (fp32 in its scratch rows, stride ld) out to y_head (position t's row at
// t * stride), 16 bytes a store, in Y; rows at or past the length dropped.
template <typename Y, int p>
__device__ inline void store_y_rows(Y* y_head, int64_t stride, const float* scratch, int ld, int64_t first_position,
                                    int64_t length, int lane) {
  constexpr int kPerStore = 16 / sizeof(Y), kRowVectors = p / kPerStore;
  for (int k = lane; k < 16 * kRowVectors; k += 32) {
    const int row = k / kRowVectors, col = (k % kRowVectors) * kPerStore;
    const int64_t t = first_position + row;
    if (t >= length) continue;
    const float4* from = reinterpret_cast<const float4*>(scratch + row * ld + col);
    triax::kernels::Pack<Y, kPerStore> out;
#pragma unroll
    for (int v = 0; v < kPerStore / 4; ++v) {
      const float4 f = from[v];
      out.v[4 * v] = from_float<Y>(f.x), out.v[4 * v + 1] = from_float<Y>(f.y);
      out.v[4 * v + 2] = from_float<Y>(f.z), out.v[4 * v + 3] = from_float<Y>(f.w);
    }
    triax::kernels::store_pack(y_head + t * stride + col, out);
  }
}

template <typename T, typename Y, int kPFrags>
__global__ void __launch_bounds__(kThreads, kMinBlocks<kPFrags>)
    chunk_scan_kernel(const T* __restrict__ C, const T* __restrict__ xdt, const float* __restrict__ scores,
                      const float* __restrict__ decay, const float* __restrict__ entering, Y* __restrict__ y,
                      ChunkScanShape s) {
  constexpr int p = kPFrags * 16;
  extern __shared__ __align__(128) unsigned char shared[];
  const ForwardLayout layout = forward_layout(s.state, p, s.positions);
  T* c_tile = reinterpret_cast<T*>(shared + layout.c);
  T* entering_tile = reinterpret_cast<T*>(shared + layout.entering);
  T *const x_first = reinterpret_cast<T*>(shared + layout.x), *const x_second = entering_tile;  // once step 1 is done
  T* masked_tile = reinterpret_cast<T*>(shared + layout.masked);
  float* scratch_tile = reinterpret_cast<float*>(shared + layout.scratch);
  float* decays = reinterpret_cast<float*>(shared + layout.decay);

  const int n = static_cast<int>(s.state), q = static_cast<int>(s.positions), r = static_cast<int>(s.heads);
  const int rp = r * p, row_tiles = q / kRows;
  const int i0 = (blockIdx.x % row_tiles) * kRows;     // the tile's first position in the chunk
  const int head = (blockIdx.x / row_tiles) % r;       // within the group
  const int64_t block = blockIdx.x / (row_tiles * r);  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = warp * 16;  // the warp's first row within the tile

  const T* x_head = xdt + block * q * rp + head * p;                // position j's row at j rp
  const float* warp_scores = scores + (block * q + i0 + row0) * q;  // the warp's rows, stride q

  // Loads in flight together: C rows and the first xdt tile (cp.async), the first column tile's
  // scores (registers), the decays and the entering state.
  copy_rows_async(c_tile, layout.ld_state, C + (block * q + i0) * n, n, kRows, n);
  copy_rows_async(x_first, layout.ld_head, x_head, rp, kRows, p);
  float4 tile_scores[kScoreVectors];
  load_scores(tile_scores, warp_scores, q, 0, lane);
  const float* head_decay = decay + (block * r + head) * q;
  for (int i = threadIdx.x; i < q; i += blockDim.x) decays[i] = head_decay[i];
  load_entering(entering_tile, layout.ld_state, entering + (block * rp + head * p) * n, p, n);
  wait_async_copies();
  __syncthreads();

  float* scratch = scratch_tile + row0 * layout.ld_scratch;  // the warp's own 16 rows
  T* masked = masked_tile + row0 * layout.ld_tile;           // the warp's own 16 rows

  // 1. The entering state read out, decayed from the chunk's start: the accumulators' start.
  Accumulator acc[kPFrags];
  read_out_entering<T, kPFrags>(acc, scratch, layout.ld_scratch, c_tile + row0 * layout.ld_state, entering_tile,
                                layout.ld_state, n, decays + i0 + row0);
  __syncthreads();  // every warp done with the entering state: its space takes xdt tiles now

  // 2. The causal column tiles (the diagonal one last), their xdt in x_first, x_second in turn
  // (selected, not indexed: an indexed pair of pointers lives in local memory).
  bool second = false;
  for (int j0 = 0; j0 <= i0; j0 += kRows, second = !second) {
    const bool more = j0 + kRows <= i0;
    T* const x_tile = second ? x_second : x_first;
    if (more) copy_rows_async(second ? x_first : x_second, layout.ld_head, x_head + (j0 + kRows) * rp, rp, kRows, p);
    mask_scores(masked, layout.ld_tile, tile_scores, decays, i0 + row0, j0, lane);
    if (more) load_scores(tile_scores, warp_scores, q, j0 + kRows, lane);  // used after the products
    __syncwarp();
    // On the diagonal tile the warp's M is zero right of its own 16 columns: those products skipped.
    const int columns_used = j0 == i0 ? row0 + 16 : kRows;
    accumulate_product<T, wmma::row_major>(acc, masked, layout.ld_tile, x_tile, layout.ld_head, 0, columns_used);
    wait_async_copies();
    __syncthreads();  // the next xdt tile landed; every warp done with this one
  }

  // 3. Out through the warp's scratch rows, the padding after the length dropped.
  store_rows(scratch, layout.ld_scratch, acc);
  const int64_t group = block % s.groups, chunk = (block / s.groups) % s.chunks, batch = block / (s.groups * s.chunks);
  const int64_t heads = s.groups * r;
  Y* y_head = y + (batch * s.length * heads + group * r + head) * p;  // position t's row at t heads p
  store_y_rows<Y, p>(y_head, heads * p, scratch, layout.ld_scratch, chunk * q + i0 + row0, s.length, lane);
}

template <typename T, typename Y, int kPFrags>
struct Launch {
  static cudaError_t run(const void* C, const void* xdt, const float* scores, const float* decay, const float* entering,
                         void* y, ChunkScanShape s, cudaStream_t stream) {
    return launch_tiles(chunk_scan_kernel<T, Y, kPFrags>, forward_layout(s.state, s.head_dim, s.positions).total, s,
                        stream, static_cast<const T*>(C), static_cast<const T*>(xdt), scores, decay, entering,
                        static_cast<Y*>(y));
  }
};

}  // namespace

bool chunk_scan_supports(const ChunkScanShape& s) {
  constexpr int64_t kInt32 = INT32_MAX;
  const bool head_dim = s.head_dim == 16 || s.head_dim == 32 || s.head_dim == 64 || s.head_dim == 128;
  return head_dim && s.positions > 0 && s.positions % kRows == 0 && s.state > 0 && s.state % 16 == 0 && s.heads > 0 &&
         s.positions * s.positions <= kInt32 && s.positions * s.heads * s.head_dim <= kInt32 &&
         s.heads * s.head_dim * s.state <= kInt32 &&
         forward_layout(s.state, s.head_dim, s.positions).total <= kMaxSharedBytes &&
         columns_layout(s.head_dim, s.positions).total <= kMaxSharedBytes &&
         chunk_scan_scores_shared_bytes(s) <= kMaxSharedBytes;
}

cudaError_t chunk_scan(triax::kernels::Dtype operand, const void* C, const void* xdt, const float* scores,
                       const float* decay, const float* entering, triax::kernels::Dtype y_type, void* y,
                       const ChunkScanShape& shape, cudaStream_t stream) {
  return launch_supported<Launch>(operand, y_type, shape, stream, C, xdt, scores, decay, entering, y);
}

}  // namespace triax::mamba2::kernels
