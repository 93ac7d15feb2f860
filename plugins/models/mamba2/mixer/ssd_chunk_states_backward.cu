// The chunk states' backward (ssd_chunk_states_kernels.hpp), two kernels on mma.sync:
// chunk_states_backward_xdt: per (batch, chunk, group, head, 64 positions) four warps of 16
//   positions x p channels, dweighted = B rows . d_states^T (k = n; both tiles staged once, as the
//   chunk scan v3 reads out the entering state), then from the registers d_xdt += dweighted w and
//   the dot over p of dweighted and xdt (a lane's columns in order, then across the quad's four
//   lanes): dweighted is never stored, the cuBLAS product's [q, r p] fp32 tensor and the terms
//   kernel's pass over it both go.
// chunk_states_backward_B: per (batch, chunk, group, 64 positions) eight warps (16 positions x
//   n / 2 states), the group's heads as k, one head a stage (xdt tile, d_states, weights; double
//   buffered by cp.async); the A fragments of xdt scaled by their rows' weights in registers and
//   rounded to T (weighted_xdt's bits), B fragments of d_states by ldmatrix.trans.
#include "ssd_chunk_scan_mma.cuh"
#include "ssd_chunk_states.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace chunk_states_tiles;  // NOLINT: tiles, layouts, dispatch and launch
using scan_mma::Tile;

constexpr int kXdtThreads = (kPositions / 16) * 32;
constexpr int kBWarps = 2 * (kPositions / 16);  // four row stripes, two halves of n
constexpr int kBThreads = kBWarps * 32;

// The quad's (lanes 4 g .. 4 g + 3) sum in each of them, in a fixed order.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <typename T, int p>
__global__ void __launch_bounds__(kXdtThreads, p == 128 ? 2 : 4)
    chunk_states_xdt_kernel(const T* __restrict__ B, const T* __restrict__ d_states, const T* __restrict__ xdt,
                            const float* __restrict__ to_end, float* __restrict__ d_xdt, float* __restrict__ d_to_end,
                            ChunkScanShape s) {
  constexpr int kTiles = p / 8;
  extern __shared__ __align__(128) unsigned char shared[];
  const XdtLayout layout = xdt_layout(s.state, p);
  T* b_tile = reinterpret_cast<T*>(shared + layout.b);
  T* d_tile = reinterpret_cast<T*>(shared + layout.d_states);

  const int n = static_cast<int>(s.state), q = static_cast<int>(s.positions), r = static_cast<int>(s.heads);
  const int rp = r * p, row_tiles = q / kPositions;
  const int i0 = (blockIdx.x % row_tiles) * kPositions;
  const int head = (blockIdx.x / row_tiles) % r;
  const int64_t block = blockIdx.x / (row_tiles * r);  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = scan_mma::group_of(lane), t = scan_mma::thread_of(lane);
  const int row0 = warp * 16, i = i0 + row0 + g;  // the lane's first position (the other: i + 8)

  copy_rows_async(b_tile, layout.ld, B + (block * q + i0) * n, n, kPositions, n);
  copy_rows_async(d_tile, layout.ld, d_states + (block * rp + head * p) * n, n, p, n);
  const int64_t weight_at = (block * r + head) * q + i;
  const float w_lo = to_end[weight_at], w_hi = to_end[weight_at + 8];  // requested while the tiles fly
  wait_async_copies();
  __syncthreads();

  Tile acc[kTiles];
#pragma unroll
  for (int f = 0; f < kTiles; ++f) acc[f] = Tile{{0.f, 0.f, 0.f, 0.f}};
  scan_mma::accumulate_transposed(acc, b_tile + row0 * layout.ld, layout.ld, d_tile, layout.ld, n, lane);

  // Rows i and i + 8, columns 8 f + 2 t and + 1 of the head's channels.
  const int64_t lo = (block * q + i) * rp + head * p + 2 * t, hi = lo + 8 * static_cast<int64_t>(rp);
  float dot_lo = 0.f, dot_hi = 0.f;
#pragma unroll
  for (int f = 0; f < kTiles; ++f) {
    const float2 x_lo = scan_mma::unpacked<T>(*reinterpret_cast<const uint32_t*>(xdt + lo + 8 * f));
    const float2 x_hi = scan_mma::unpacked<T>(*reinterpret_cast<const uint32_t*>(xdt + hi + 8 * f));
    float2* d_lo = reinterpret_cast<float2*>(d_xdt + lo + 8 * f);
    float2* d_hi = reinterpret_cast<float2*>(d_xdt + hi + 8 * f);
    const float2 sum_lo = *d_lo, sum_hi = *d_hi;
    *d_lo = make_float2(sum_lo.x + acc[f].c[0] * w_lo, sum_lo.y + acc[f].c[1] * w_lo);
    *d_hi = make_float2(sum_hi.x + acc[f].c[2] * w_hi, sum_hi.y + acc[f].c[3] * w_hi);
    dot_lo += acc[f].c[0] * x_lo.x + acc[f].c[1] * x_lo.y;
    dot_hi += acc[f].c[2] * x_hi.x + acc[f].c[3] * x_hi.y;
  }
  dot_lo = quad_sum(dot_lo), dot_hi = quad_sum(dot_hi);
  if (t == 0) {
    d_to_end[weight_at] = dot_lo * w_lo;
    d_to_end[weight_at + 8] = dot_hi * w_hi;
  }
}

template <typename T, int n>
__global__ void __launch_bounds__(kBThreads, 2)
    chunk_states_b_kernel(const T* __restrict__ xdt, const float* __restrict__ to_end, const T* __restrict__ d_states,
                          float* __restrict__ d_B, ChunkScanShape s) {
  constexpr int kHalf = n / 2, kTiles = kHalf / 8;
  extern __shared__ __align__(128) unsigned char shared[];
  const BLayout layout = b_layout(n, s.head_dim);

  const int p = static_cast<int>(s.head_dim), q = static_cast<int>(s.positions), r = static_cast<int>(s.heads);
  const int rp = r * p, row_tiles = q / kPositions;
  const int i0 = (blockIdx.x % row_tiles) * kPositions;
  const int64_t block = blockIdx.x / row_tiles;  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = scan_mma::group_of(lane), t = scan_mma::thread_of(lane);
  const int row0 = (warp % 4) * 16, n0 = (warp / 4) * kHalf;

  auto stage = [&](int head, int k) {
    unsigned char* at = shared + k * layout.stage;
    copy_rows_async(reinterpret_cast<T*>(at + layout.x), layout.ld_x, xdt + (block * q + i0) * rp + head * p, rp,
                    kPositions, p);
    copy_rows_async(reinterpret_cast<T*>(at + layout.d_states), layout.ld_d, d_states + (block * rp + head * p) * n, n,
                    p, n);
    copy_rows_async(reinterpret_cast<float*>(at + layout.weights), kPositions, to_end + (block * r + head) * q + i0,
                    kPositions, 1, kPositions);
  };
  stage(0, 0);

  Tile acc[kTiles];
#pragma unroll
  for (int f = 0; f < kTiles; ++f) acc[f] = Tile{{0.f, 0.f, 0.f, 0.f}};
  for (int head = 0; head < r; ++head) {
    const int k = head & 1;
    wait_async_copies();
    __syncthreads();  // this head's stage landed; every warp done with the other
    if (head + 1 < r) stage(head + 1, k ^ 1);
    const unsigned char* at = shared + k * layout.stage;
    const T* rows = reinterpret_cast<const T*>(at + layout.x) + row0 * layout.ld_x;
    const T* d_tile = reinterpret_cast<const T*>(at + layout.d_states) + n0;
    const float* weights = reinterpret_cast<const float*>(at + layout.weights);
    const float w_lo = weights[row0 + g], w_hi = weights[row0 + g + 8];
    for (int kk = 0; kk < p; kk += 16) {
      uint32_t a[4];  // a[0], a[2]: row g; a[1], a[3]: row g + 8
      scan_mma::load_matrices<false>(a, rows + (lane % 16) * layout.ld_x + kk + 8 * (lane / 16));
      a[0] = scan_mma::scaled<T>(a[0], w_lo, w_lo);
      a[1] = scan_mma::scaled<T>(a[1], w_hi, w_hi);
      a[2] = scan_mma::scaled<T>(a[2], w_lo, w_lo);
      a[3] = scan_mma::scaled<T>(a[3], w_hi, w_hi);
      scan_mma::accumulate_step<T, true>(acc, a, d_tile + kk * layout.ld_d, layout.ld_d, lane);
    }
  }

  float* out = d_B + (block * q + i0 + row0 + g) * n + n0 + 2 * t;
#pragma unroll
  for (int f = 0; f < kTiles; ++f) {
    scan_mma::store_pair(out + 8 * f, acc[f].c[0], acc[f].c[1]);
    scan_mma::store_pair(out + 8 * n + 8 * f, acc[f].c[2], acc[f].c[3]);
  }
}

}  // namespace

cudaError_t chunk_states_backward_xdt(triax::kernels::Dtype operand, const void* B, const void* d_states,
                                      const void* xdt, const float* to_end, float* d_xdt, float* d_to_end,
                                      const ChunkScanShape& s, cudaStream_t stream) {
  if (!chunk_states_supports(s)) return cudaErrorInvalidValue;
  const int64_t blocks = s.batch * s.chunks * s.groups * s.heads * (s.positions / kPositions);
  if (blocks == 0) return cudaSuccess;
  return dispatch_operand_and_size(operand, s.head_dim, [&](auto tag, auto head_dim) {
    using T = typename decltype(tag)::type;
    return launch(chunk_states_xdt_kernel<T, decltype(head_dim)::value>, blocks, kXdtThreads,
                  xdt_layout(s.state, s.head_dim).total, stream, static_cast<const T*>(B),
                  static_cast<const T*>(d_states), static_cast<const T*>(xdt), to_end, d_xdt, d_to_end, s);
  });
}

cudaError_t chunk_states_backward_B(triax::kernels::Dtype operand, const void* xdt, const float* to_end,
                                    const void* d_states, float* d_B, const ChunkScanShape& s, cudaStream_t stream) {
  if (!chunk_states_supports(s)) return cudaErrorInvalidValue;
  const int64_t blocks = s.batch * s.chunks * s.groups * (s.positions / kPositions);
  if (blocks == 0) return cudaSuccess;
  return dispatch_operand_and_size(operand, s.state, [&](auto tag, auto state) {
    using T = typename decltype(tag)::type;
    return launch(chunk_states_b_kernel<T, decltype(state)::value>, blocks, kBThreads,
                  b_layout(s.state, s.head_dim).total, stream, static_cast<const T*>(xdt), to_end,
                  static_cast<const T*>(d_states), d_B, s);
  });
}

}  // namespace triax::mamba2::kernels
