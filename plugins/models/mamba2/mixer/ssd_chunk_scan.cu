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
//   3. acc written to y in [b, l, H, p] order, the padding after the length dropped.
// Shared memory: the tile's C rows, the xdt tile (reloaded per column tile), the entering state in
// the operand type (as read_out rounds it), per-warp fp32 scratch and M rows, the decays.
#include "ssd_chunk_scan.cuh"
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace scan_tiles;  // NOLINT: the fragments, tile sizes and helpers of ssd_chunk_scan.cuh
using triax::kernels::from_float;

template <typename T, int kPFrags>
__global__ void __launch_bounds__(kThreads)
    chunk_scan_kernel(const T* __restrict__ C, const T* __restrict__ xdt, const float* __restrict__ scores,
                      const float* __restrict__ decay, const float* __restrict__ entering, float* __restrict__ y,
                      ChunkScanShape s) {
  constexpr int p = kPFrags * 16;
  extern __shared__ __align__(128) unsigned char shared[];
  const ForwardLayout layout = forward_layout(s.state, p, s.positions);
  T* c_tile = reinterpret_cast<T*>(shared + layout.c);
  T* x_tile = reinterpret_cast<T*>(shared + layout.x);
  T* entering_tile = reinterpret_cast<T*>(shared + layout.entering);
  T* masked_tile = reinterpret_cast<T*>(shared + layout.masked);
  float* scratch_tile = reinterpret_cast<float*>(shared + layout.scratch);
  float* decays = reinterpret_cast<float*>(shared + layout.decay);

  const int64_t n = s.state, q = s.positions, r = s.heads, rp = r * p;
  const int64_t row_tiles = q / kRows;
  const int64_t i0 = (blockIdx.x % row_tiles) * kRows;  // the tile's first position in the chunk
  const int64_t head = (blockIdx.x / row_tiles) % r;    // within the group
  const int64_t block = blockIdx.x / (row_tiles * r);   // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = warp * 16;  // the warp's first row within the tile

  // The head's decays, the tile's C rows, the head's entering state in the operand type.
  for (int64_t i = threadIdx.x; i < q; i += blockDim.x) decays[i] = decay[(block * r + head) * q + i];
  copy_rows(c_tile, layout.ld_state, C + (block * q + i0) * n, n, kRows, static_cast<int>(n));
  const float* state = entering + (block * rp + head * p) * n;
  for (int64_t k = threadIdx.x; k < p * n; k += blockDim.x)
    entering_tile[(k / n) * layout.ld_state + k % n] = from_float<T>(state[k]);
  __syncthreads();

  const T* c_rows = c_tile + row0 * layout.ld_state;
  float* scratch = scratch_tile + row0 * layout.ld_scratch;  // the warp's own 16 rows
  T* masked = masked_tile + row0 * layout.ld_tile;           // the warp's own 16 rows
  const float* row_decays = decays + i0 + row0;

  // 1. The entering state read out, decayed from the chunk's start: the accumulators' start.
  Accumulator acc[kPFrags];
  read_out_entering<T, kPFrags>(acc, scratch, layout.ld_scratch, c_rows, entering_tile, layout.ld_state, n, row_decays);

  // 2. The causal column tiles: the diagonal tile is the last one.
  for (int64_t j0 = 0; j0 <= i0; j0 += kRows) {
    __syncthreads();  // every warp done with the previous xdt tile
    copy_rows(x_tile, layout.ld_head, xdt + (block * q + j0) * rp + head * p, rp, kRows, p);
    __syncthreads();

    // The decay mask; no exp above the diagonal (it could overflow there). Lanes read a row's
    // consecutive columns: coalesced.
    for (int k = lane; k < 16 * kRows; k += 32) {
      const int row = k / kRows, col = k % kRows;
      const int64_t i = i0 + row0 + row, j = j0 + col;
      const float v = i >= j ? expf(decays[i] - decays[j]) * scores[(block * q + i) * q + j] : 0.f;
      masked[row * layout.ld_tile + col] = from_float<T>(v);
    }
    __syncwarp();
    // On the diagonal tile the warp's M is zero right of its own 16 columns: those products skipped.
    const int columns_used = j0 == i0 ? row0 + 16 : kRows;
    accumulate_product<T, wmma::row_major>(acc, masked, layout.ld_tile, x_tile, layout.ld_head, 0, columns_used);
  }

  // 3. Out through the warp's scratch rows (no other warp reads them any more).
  __syncwarp();
  store_rows(scratch, layout.ld_scratch, acc);
  const int64_t group = block % s.groups, chunk = (block / s.groups) % s.chunks, batch = block / (s.groups * s.chunks);
  const int64_t heads = s.groups * r, global_head = group * r + head;
  for (int k = lane; k < 16 * p; k += 32) {
    const int row = k / p, col = k % p;
    const int64_t t = chunk * q + i0 + row0 + row;
    if (t < s.length) y[((batch * s.length + t) * heads + global_head) * p + col] = scratch[row * layout.ld_scratch + col];
  }
}

template <typename T, int kPFrags>
cudaError_t launch(const void* C, const void* xdt, const float* scores, const float* decay, const float* entering,
                   float* y, const ChunkScanShape& s, cudaStream_t stream) {
  const auto kernel = chunk_scan_kernel<T, kPFrags>;
  const size_t shared = forward_layout(s.state, s.head_dim, s.positions).total;
  const cudaError_t allowed = triax::kernels::allow_dynamic_shared_memory(kernel, shared);
  if (allowed != cudaSuccess) return allowed;
  const int64_t blocks = s.batch * s.chunks * s.groups * s.heads * (s.positions / kRows);
  kernel<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(
      static_cast<const T*>(C), static_cast<const T*>(xdt), scores, decay, entering, y, s);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_for_head_dim(const void* C, const void* xdt, const float* scores, const float* decay,
                                const float* entering, float* y, const ChunkScanShape& s, cudaStream_t stream) {
  switch (s.head_dim) {
    case 16:
      return launch<T, 1>(C, xdt, scores, decay, entering, y, s, stream);
    case 32:
      return launch<T, 2>(C, xdt, scores, decay, entering, y, s, stream);
    case 64:
      return launch<T, 4>(C, xdt, scores, decay, entering, y, s, stream);
    case 128:
      return launch<T, 8>(C, xdt, scores, decay, entering, y, s, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool chunk_scan_supports(const ChunkScanShape& s) {
  const bool head_dim = s.head_dim == 16 || s.head_dim == 32 || s.head_dim == 64 || s.head_dim == 128;
  return head_dim && s.positions > 0 && s.positions % kRows == 0 && s.state > 0 && s.state % 16 == 0 &&
         s.heads > 0 && forward_layout(s.state, s.head_dim, s.positions).total <= kMaxSharedBytes &&
         chunk_scan_backward_shared_bytes(s) <= kMaxSharedBytes;
}

cudaError_t chunk_scan(triax::kernels::Dtype operand, const void* C, const void* xdt, const float* scores,
                       const float* decay, const float* entering, float* y, const ChunkScanShape& shape,
                       cudaStream_t stream) {
  if (!chunk_scan_supports(shape)) return cudaErrorInvalidValue;
  if (shape.batch * shape.chunks * shape.groups == 0) return cudaSuccess;
  switch (operand) {
    case triax::kernels::Dtype::BFloat16:
      return launch_for_head_dim<__nv_bfloat16>(C, xdt, scores, decay, entering, y, shape, stream);
    case triax::kernels::Dtype::Float16:
      return launch_for_head_dim<__half>(C, xdt, scores, decay, entering, y, shape, stream);
    default:
      return cudaErrorInvalidValue;  // WMMA takes 16-bit operands only
  }
}

}  // namespace triax::mamba2::kernels
