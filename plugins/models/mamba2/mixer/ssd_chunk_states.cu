// The chunk states' forward (chunk_states_mma, ssd_chunk_states_kernels.hpp): per (batch, chunk,
// group, head, 64 of its channels) one block of four warps, each warp 16 channels x all n states,
// the positions as k in tiles of 64 (xdt and B staged by cp.async, double buffered). A warp's A
// fragment is xdt^T (ldmatrix.trans of the [position][channel] tile), each k pair scaled by its
// weights in registers and rounded to T (weighted_xdt's bits); B fragments from the [position][n]
// tile by ldmatrix.trans (scan_mma::accumulate_step). The fp32 accumulators are stored as they are.
#include "ssd_chunk_scan_mma.cuh"
#include "ssd_chunk_states.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace chunk_states_tiles;  // NOLINT: tiles, layouts, dispatch and launch
using scan_mma::Tile;

constexpr int kForwardWarps = kChannels / 16;
constexpr int kForwardThreads = kForwardWarps * 32;

// Four blocks an SM at n = 64 (up to 128 registers); three at n = 128, whose 64 accumulators a
// thread spilled at 128 registers.
template <typename T, int n>
__global__ void __launch_bounds__(kForwardThreads, n == 128 ? 3 : 4)
    chunk_states_kernel(const T* __restrict__ xdt, const float* __restrict__ to_end, const T* __restrict__ B,
                        float* __restrict__ states, ChunkScanShape s) {
  constexpr int kTiles = n / 8;
  extern __shared__ __align__(128) unsigned char shared[];
  const ForwardLayout layout = forward_layout(n, s.positions);
  float* weights = reinterpret_cast<float*>(shared + layout.weights);

  const int q = static_cast<int>(s.positions), r = static_cast<int>(s.heads), p = static_cast<int>(s.head_dim);
  const int rp = r * p, channel_tiles = p / kChannels;
  const int c0 = (blockIdx.x % channel_tiles) * kChannels;  // the block's first channel of its head
  const int head = (blockIdx.x / channel_tiles) % r;
  const int64_t block = blockIdx.x / (channel_tiles * r);  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = scan_mma::group_of(lane), t = scan_mma::thread_of(lane);

  const T* x_rows = xdt + block * q * rp + head * p + c0;  // position j's channels at j rp
  const T* b_rows = B + block * q * n;
  auto stage = [&](int j0, int buffer) {
    unsigned char* at = shared + buffer * layout.stage;
    copy_rows_async(reinterpret_cast<T*>(at + layout.x), layout.ld_x, x_rows + j0 * rp, rp, kPositions, kChannels);
    copy_rows_async(reinterpret_cast<T*>(at + layout.b), layout.ld_b, b_rows + j0 * n, n, kPositions, n);
  };
  stage(0, 0);
  const float* head_weights = to_end + (block * r + head) * q;
  for (int k = threadIdx.x; k < q; k += blockDim.x) weights[k] = head_weights[k];

  Tile acc[kTiles];
#pragma unroll
  for (int f = 0; f < kTiles; ++f) acc[f] = Tile{{0.f, 0.f, 0.f, 0.f}};
  const int m0 = warp * 16;  // the warp's channels within the block's
  const int matrix = lane / 8, row = lane % 8;
  int buffer = 0;
  for (int j0 = 0; j0 < q; j0 += kPositions, buffer ^= 1) {
    wait_async_copies();
    __syncthreads();  // this tile landed (the weights too); every warp done with the other buffer
    if (j0 + kPositions < q) stage(j0 + kPositions, buffer ^ 1);
    const unsigned char* at = shared + buffer * layout.stage;
    const T* x_tile = reinterpret_cast<const T*>(at + layout.x);
    const T* b_tile = reinterpret_cast<const T*>(at + layout.b);
#pragma unroll
    for (int kk = 0; kk < kPositions; kk += 16) {
      // Matrices 0, 1: channels 0-7, 8-15 at positions 0-7; 2, 3: the same at positions 8-15.
      uint32_t a[4];
      scan_mma::load_matrices<true>(a, x_tile + (kk + 8 * (matrix / 2) + row) * layout.ld_x + m0 + 8 * (matrix % 2));
      const float2 w_lo = *reinterpret_cast<const float2*>(weights + j0 + kk + 2 * t);
      const float2 w_hi = *reinterpret_cast<const float2*>(weights + j0 + kk + 8 + 2 * t);
      a[0] = scan_mma::scaled<T>(a[0], w_lo.x, w_lo.y);
      a[1] = scan_mma::scaled<T>(a[1], w_lo.x, w_lo.y);
      a[2] = scan_mma::scaled<T>(a[2], w_hi.x, w_hi.y);
      a[3] = scan_mma::scaled<T>(a[3], w_hi.x, w_hi.y);
      scan_mma::accumulate_step<T, true>(acc, a, b_tile + kk * layout.ld_b, layout.ld_b, lane);
    }
  }

  float* out = states + (block * rp + head * p + c0 + m0 + g) * n + 2 * t;
#pragma unroll
  for (int f = 0; f < kTiles; ++f) {
    scan_mma::store_pair(out + 8 * f, acc[f].c[0], acc[f].c[1]);
    scan_mma::store_pair(out + 8 * n + 8 * f, acc[f].c[2], acc[f].c[3]);
  }
}

}  // namespace

bool chunk_states_supports(const ChunkScanShape& s) {
  constexpr int64_t kInt32 = INT32_MAX;
  const bool dims = (s.head_dim == 64 || s.head_dim == 128) && (s.state == 64 || s.state == 128);
  return dims && s.heads > 0 && s.positions > 0 && s.positions % kPositions == 0 &&
         s.positions * s.heads * s.head_dim <= kInt32 && s.heads * s.head_dim * s.state <= kInt32 &&
         s.heads * s.positions <= kInt32 && forward_layout(s.state, s.positions).total <= scan_tiles::kMaxSharedBytes &&
         xdt_layout(s.state, s.head_dim).total <= scan_tiles::kMaxSharedBytes &&
         b_layout(s.state, s.head_dim).total <= scan_tiles::kMaxSharedBytes;
}

cudaError_t chunk_states_mma(triax::kernels::Dtype operand, const void* xdt, const float* to_end, const void* B,
                             float* states, const ChunkScanShape& s, cudaStream_t stream) {
  if (!chunk_states_supports(s)) return cudaErrorInvalidValue;
  const int64_t blocks = s.batch * s.chunks * s.groups * s.heads * (s.head_dim / kChannels);
  if (blocks == 0) return cudaSuccess;
  return dispatch_operand_and_size(operand, s.state, [&](auto tag, auto state) {
    using T = typename decltype(tag)::type;
    return launch(chunk_states_kernel<T, decltype(state)::value>, blocks, kForwardThreads,
                  forward_layout(s.state, s.positions).total, stream, static_cast<const T*>(xdt), to_end,
                  static_cast<const T*>(B), states, s);
  });
}

}  // namespace triax::mamba2::kernels
