// The fused chunk scan backward's second kernel (ssd_chunk_scan_columns.cu has the first), scores:
// one block per (batch, chunk, group, row tile, column tile); it walks the heads, adding dM L to dS
// in registers (one fixed order: the same bits on every run), and writes dS in the operand type;
// dC = dS B and dB = dS^T C are the caller's GEMMs. It loads the next head's dy and xdt tiles and
// decays (cp.async, into a second copy of those buffers) while this head's product and mask run.
// Offsets within a block are int32 (chunk_scan_supports bounds them).
#include "ssd_chunk_scan.cuh"
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace scan_tiles;  // NOLINT: the fragments, tile sizes and helpers of ssd_chunk_scan.cuh

constexpr int kTileFrags = kRows / 16;  // a tile's columns in fragments

template <typename T>
__global__ void __launch_bounds__(kThreads)
    chunk_scan_scores_kernel(const T* __restrict__ xdt, const T* __restrict__ dy, const float* __restrict__ decay,
                             T* __restrict__ d_scores, ChunkScanShape s) {
  extern __shared__ __align__(128) unsigned char shared[];
  const int p = static_cast<int>(s.head_dim), q = static_cast<int>(s.positions), r = static_cast<int>(s.heads);
  const int rp = r * p;
  const ScoresLayout layout = scores_layout(p);
  float* scratch = reinterpret_cast<float*>(shared + layout.scratch) + (threadIdx.x / 32) * 16 * layout.ld_scratch;

  const int tiles = q / kRows;
  const int i0 = (blockIdx.x % tiles) * kRows, j0 = ((blockIdx.x / tiles) % tiles) * kRows;
  const int64_t block = blockIdx.x / (tiles * tiles);  // (batch, chunk, group) flattened
  const int row0 = (threadIdx.x / 32) * 16;

  // dS, 16 rows x 64 columns a warp: lane holds columns lane and lane + 32 of each row.
  float sum[16][2];
#pragma unroll
  for (int row = 0; row < 16; ++row) sum[row][0] = sum[row][1] = 0.f;

  if (j0 <= i0) {  // tiles above the diagonal stay zero (a uniform branch: the block's barriers hold)
    const T* dy_rows = dy + (block * q + i0) * rp;  // head h's tile at h p, stride rp
    const T* x_rows = xdt + (block * q + j0) * rp;
    const float* head_decays = decay + block * r * q;  // head h's at h q
    // What head `head` brings, into copy `second` of the buffers (cp.async: wait, then a barrier).
    auto stage = [&](int head, bool second) {
      stage_scores_head(shared + (second ? layout.stage : 0), layout, dy_rows, x_rows, head_decays, head, p, q, rp, i0,
                        j0);
    };
    stage(0, false);
    wait_async_copies();
    __syncthreads();
    bool second = false;
    for (int head = 0; head < r; ++head, second = !second) {
      if (head + 1 < r) stage(head + 1, !second);
      const unsigned char* at = shared + (second ? layout.stage : 0);
      Accumulator tile[kTileFrags];
      product_transposed_rows<T, kTileFrags>(tile, scratch, layout.ld_scratch,
                                             reinterpret_cast<const T*>(at + layout.dy) + row0 * layout.ld_head,
                                             reinterpret_cast<const T*>(at + layout.x), layout.ld_head, p);
      add_decayed_rows(sum, scratch, layout.ld_scratch, reinterpret_cast<const float*>(at + layout.row_decays) + row0,
                       reinterpret_cast<const float*>(at + layout.column_decays), i0 + row0, j0);
      wait_async_copies();
      __syncthreads();  // the next head's tiles landed; every warp done with this head's
    }
  }
  write_score_rows(d_scores + block * q * q + (i0 + row0) * q + j0, q, sum);
}

}  // namespace

size_t chunk_scan_scores_shared_bytes(const ChunkScanShape& s) { return scores_layout(s.head_dim).total; }

cudaError_t chunk_scan_scores(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* decay,
                              void* d_scores, const ChunkScanShape& shape, cudaStream_t stream) {
  if (!chunk_scan_supports(shape)) return cudaErrorInvalidValue;
  if (shape.batch * shape.chunks * shape.groups == 0) return cudaSuccess;
  const size_t shared = chunk_scan_scores_shared_bytes(shape);
  const int64_t tiles = shape.positions / kRows;
  const unsigned blocks = static_cast<unsigned>(shape.batch * shape.chunks * shape.groups * tiles * tiles);
  auto run = [&](auto kernel, auto operand_type) {
    using T = decltype(operand_type);
    const cudaError_t allowed = triax::kernels::allow_dynamic_shared_memory(kernel, shared);
    if (allowed != cudaSuccess) return allowed;
    kernel<<<blocks, kThreads, shared, stream>>>(static_cast<const T*>(xdt), static_cast<const T*>(dy), decay,
                                                 static_cast<T*>(d_scores), shape);
    return cudaGetLastError();
  };
  switch (operand) {
    case triax::kernels::Dtype::BFloat16:
      return run(chunk_scan_scores_kernel<__nv_bfloat16>, __nv_bfloat16{});
    case triax::kernels::Dtype::Float16:
      return run(chunk_scan_scores_kernel<__half>, __half{});
    default:
      return cudaErrorInvalidValue;  // WMMA takes 16-bit operands only
  }
}

}  // namespace triax::mamba2::kernels
