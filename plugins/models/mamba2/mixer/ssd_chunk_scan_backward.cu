// The fused chunk scan's backward through the intra-chunk term y = M xdt per head, M = L o S with
// S = C B^T (the group's scores) and L_ij = exp(decay_i - decay_j) for i >= j, else 0
// (ssd_kernels.hpp). Two kernels on tensor cores, neither writing a [b, c, g, r, q, q] tensor:
//
// columns: one block per (batch, chunk, group, head, tile of 64 columns j); it walks the row
//   tiles i >= j. Per row tile, each warp forms 16 rows of dM = dy xdt^T (fp32), then, with S
//   read from global memory (the group's, as the forward reads it), M (rounded to the operand
//   type, as the forward rounds it) and G = dM L S; G's row sums go out per column tile
//   (row_partials), its column sums build up in shared memory; after a barrier each warp adds
//   M^T dy to its 16 columns' d_xdt, kept in accumulator fragments to the end.
// scores: one block per (batch, chunk, group, row tile, column tile); it walks the heads, adding
//   dM L to dS in registers (one fixed order: the same bits on every run), and writes dS in the
//   operand type. dC = dS B and dB = dS^T C are the caller's GEMMs.
#include "ssd_chunk_scan.cuh"
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace scan_tiles;  // NOLINT: the fragments, tile sizes and helpers of ssd_chunk_scan.cuh
using triax::kernels::from_float;

constexpr int kTileFrags = kRows / 16;  // a tile's columns in fragments

template <typename T, int kPFrags>
__global__ void __launch_bounds__(kThreads)
    chunk_scan_columns_kernel(const T* __restrict__ xdt, const T* __restrict__ dy, const float* __restrict__ scores,
                              const float* __restrict__ decay, float* __restrict__ d_xdt,
                              float* __restrict__ row_partials, float* __restrict__ column_sums, ChunkScanShape s) {
  constexpr int p = kPFrags * 16;
  extern __shared__ __align__(128) unsigned char shared[];
  const ColumnsLayout layout = columns_layout(p, s.positions);
  T* dy_tile = reinterpret_cast<T*>(shared + layout.dy);
  T* x_tile = reinterpret_cast<T*>(shared + layout.x);
  T* masked_tile = reinterpret_cast<T*>(shared + layout.masked);
  float* scratch_tile = reinterpret_cast<float*>(shared + layout.scratch);
  float* d_masked_tile = reinterpret_cast<float*>(shared + layout.d_masked);
  float* decays = reinterpret_cast<float*>(shared + layout.decay);
  float* columns = reinterpret_cast<float*>(shared + layout.columns);  // [kWarps][kRows]

  const int64_t q = s.positions, r = s.heads, rp = r * p;
  const int64_t tiles = q / kRows;
  const int64_t column_tile = blockIdx.x % tiles, j0 = column_tile * kRows;
  const int64_t head = (blockIdx.x / tiles) % r;  // within the group
  const int64_t block = blockIdx.x / (tiles * r);  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = warp * 16;  // the warp's rows of a row tile, then its columns of the column tile

  for (int64_t i = threadIdx.x; i < q; i += blockDim.x) decays[i] = decay[(block * r + head) * q + i];
  for (int k = threadIdx.x; k < kWarps * kRows; k += blockDim.x) columns[k] = 0.f;
  copy_rows(x_tile, layout.ld_head, xdt + (block * q + j0) * rp + head * p, rp, kRows, p);

  float* scratch = scratch_tile + row0 * layout.ld_scratch;    // the warp's own 16 rows
  float* d_masked = d_masked_tile + row0 * layout.ld_scratch;  // the warp's own 16 rows
  float* own_columns = columns + warp * kRows;
  Accumulator acc[kPFrags];  // d_xdt of the warp's 16 columns
#pragma unroll
  for (int f = 0; f < kPFrags; ++f) wmma::fill_fragment(acc[f], 0.f);

  for (int64_t i0 = j0; i0 < q; i0 += kRows) {  // rows above the column tile are masked out
    __syncthreads();  // every warp done with the previous row tile (and the first loads)
    copy_rows(dy_tile, layout.ld_head, dy + (block * q + i0) * rp + head * p, rp, kRows, p);
    __syncthreads();

    Accumulator tile[kTileFrags];
    product_transposed_rows<T, kTileFrags>(tile, d_masked, layout.ld_scratch, dy_tile + row0 * layout.ld_head, x_tile,
                                           layout.ld_head, p);

    // M and G row by row, a row's reads of S coalesced (masked_and_gradient_row).
    T* masked = masked_tile + row0 * layout.ld_tile;
    for (int row = 0; row < 16; ++row) {
      const int64_t i = i0 + row0 + row;
      const float* score_row = scores + (block * q + i) * q + j0;
      const float row_sum =
          masked_and_gradient_row(masked + row * layout.ld_tile, d_masked + row * layout.ld_scratch, own_columns,
                                  decays, i, j0, [&](int half) { return score_row[lane + 32 * half]; });
      if (lane == 0) row_partials[((block * r + head) * q + i) * tiles + column_tile] = row_sum;
    }
    __syncthreads();  // M whole: each warp now reads all its rows for its own columns

    // d_xdt[j] += sum_i M_ij dy_i: M^T's rows are M's columns (a column-major A fragment). On the
    // diagonal tile M is zero above the warp's own 16 columns' rows: those products skipped.
    accumulate_product<T, wmma::col_major>(acc, masked_tile + row0, layout.ld_tile, dy_tile, layout.ld_head,
                                           i0 == j0 ? row0 : 0, kRows);
  }

  __syncwarp();
  write_column_outputs(scratch, layout.ld_scratch, acc, d_xdt + (block * q + j0 + row0) * rp + head * p, rp, columns,
                       column_sums + (block * r + head) * q + j0);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    chunk_scan_scores_kernel(const T* __restrict__ xdt, const T* __restrict__ dy, const float* __restrict__ decay,
                             T* __restrict__ d_scores, ChunkScanShape s) {
  extern __shared__ __align__(128) unsigned char shared[];
  const int64_t p = s.head_dim, q = s.positions, r = s.heads, rp = r * p;
  const ScoresLayout layout = scores_layout(p, 1);
  T* dy_tile = reinterpret_cast<T*>(shared + layout.dy);
  T* x_tile = reinterpret_cast<T*>(shared + layout.x);
  float* scratch_tile = reinterpret_cast<float*>(shared + layout.scratch);
  float* row_decays = reinterpret_cast<float*>(shared + layout.row_decays);
  float* column_decays = reinterpret_cast<float*>(shared + layout.column_decays);

  const int64_t tiles = q / kRows;
  const int64_t i0 = (blockIdx.x % tiles) * kRows, j0 = ((blockIdx.x / tiles) % tiles) * kRows;
  const int64_t block = blockIdx.x / (tiles * tiles);  // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = warp * 16;

  // dS, 16 rows x 64 columns a warp: lane holds columns lane and lane + 32 of each row.
  float sum[16][2];
#pragma unroll
  for (int row = 0; row < 16; ++row) sum[row][0] = sum[row][1] = 0.f;

  if (j0 <= i0) {  // tiles above the diagonal stay zero (a uniform branch: the block's barriers hold)
    float* scratch = scratch_tile + row0 * layout.ld_scratch;
    for (int64_t head = 0; head < r; ++head) {
      __syncthreads();  // every warp done with the previous head's tiles
      copy_rows(dy_tile, layout.ld_head, dy + (block * q + i0) * rp + head * p, rp, kRows, static_cast<int>(p));
      copy_rows(x_tile, layout.ld_head, xdt + (block * q + j0) * rp + head * p, rp, kRows, static_cast<int>(p));
      for (int k = threadIdx.x; k < kRows; k += blockDim.x) {
        row_decays[k] = decay[(block * r + head) * q + i0 + k];
        column_decays[k] = decay[(block * r + head) * q + j0 + k];
      }
      __syncthreads();
      Accumulator tile[kTileFrags];
      product_transposed_rows<T, kTileFrags>(tile, scratch, layout.ld_scratch, dy_tile + row0 * layout.ld_head,
                                             x_tile, layout.ld_head, p);
      add_decayed_rows(sum, scratch, layout.ld_scratch, row_decays + row0, column_decays, i0 + row0, j0);
      __syncwarp();  // the scratch rows read before the next head's products overwrite them
    }
  }
  write_score_rows(d_scores + block * q * q + (i0 + row0) * q + j0, q, sum);
}

template <typename T, int kPFrags>
cudaError_t launch_columns(const void* xdt, const void* dy, const float* scores, const float* decay, float* d_xdt,
                           float* row_partials, float* column_sums, const ChunkScanShape& s, cudaStream_t stream) {
  const auto kernel = chunk_scan_columns_kernel<T, kPFrags>;
  const size_t shared = columns_layout(s.head_dim, s.positions).total;
  const cudaError_t allowed = triax::kernels::allow_dynamic_shared_memory(kernel, shared);
  if (allowed != cudaSuccess) return allowed;
  const int64_t blocks = s.batch * s.chunks * s.groups * s.heads * (s.positions / kRows);
  kernel<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(
      static_cast<const T*>(xdt), static_cast<const T*>(dy), scores, decay, d_xdt, row_partials, column_sums, s);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_scores(const void* xdt, const void* dy, const float* decay, void* d_scores,
                          const ChunkScanShape& s, cudaStream_t stream) {
  const auto kernel = chunk_scan_scores_kernel<T>;
  const size_t shared = scores_layout(s.head_dim, 1).total;
  const cudaError_t allowed = triax::kernels::allow_dynamic_shared_memory(kernel, shared);
  if (allowed != cudaSuccess) return allowed;
  const int64_t tiles = s.positions / kRows;
  const int64_t blocks = s.batch * s.chunks * s.groups * tiles * tiles;
  kernel<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(
      static_cast<const T*>(xdt), static_cast<const T*>(dy), decay, static_cast<T*>(d_scores), s);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_columns_for_head_dim(const void* xdt, const void* dy, const float* scores, const float* decay,
                                       float* d_xdt, float* row_partials, float* column_sums, const ChunkScanShape& s,
                                       cudaStream_t stream) {
  switch (s.head_dim) {
    case 16:
      return launch_columns<T, 1>(xdt, dy, scores, decay, d_xdt, row_partials, column_sums, s, stream);
    case 32:
      return launch_columns<T, 2>(xdt, dy, scores, decay, d_xdt, row_partials, column_sums, s, stream);
    case 64:
      return launch_columns<T, 4>(xdt, dy, scores, decay, d_xdt, row_partials, column_sums, s, stream);
    case 128:
      return launch_columns<T, 8>(xdt, dy, scores, decay, d_xdt, row_partials, column_sums, s, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t launch_scores_for_operand(triax::kernels::Dtype operand, const void* xdt, const void* dy,
                                      const float* decay, void* d_scores, const ChunkScanShape& shape,
                                      cudaStream_t stream) {
  switch (operand) {
    case triax::kernels::Dtype::BFloat16:
      return launch_scores<__nv_bfloat16>(xdt, dy, decay, d_scores, shape, stream);
    case triax::kernels::Dtype::Float16:
      return launch_scores<__half>(xdt, dy, decay, d_scores, shape, stream);
    default:
      return cudaErrorInvalidValue;  // WMMA takes 16-bit operands only
  }
}

}  // namespace

size_t chunk_scan_backward_shared_bytes(const ChunkScanShape& s) {
  const size_t columns = columns_layout(s.head_dim, s.positions).total, scores = scores_layout(s.head_dim, 1).total;
  return columns > scores ? columns : scores;
}

cudaError_t chunk_scan_backward(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* scores,
                                const float* decay, float* d_xdt, void* d_scores, float* row_partials,
                                float* column_sums, const ChunkScanShape& shape, cudaStream_t stream) {
  if (!chunk_scan_supports(shape)) return cudaErrorInvalidValue;
  if (shape.batch * shape.chunks * shape.groups == 0) return cudaSuccess;
  cudaError_t status = cudaErrorInvalidValue;
  switch (operand) {
    case triax::kernels::Dtype::BFloat16:
      status = launch_columns_for_head_dim<__nv_bfloat16>(xdt, dy, scores, decay, d_xdt, row_partials, column_sums,
                                                          shape, stream);
      break;
    case triax::kernels::Dtype::Float16:
      status = launch_columns_for_head_dim<__half>(xdt, dy, scores, decay, d_xdt, row_partials, column_sums, shape,
                                                   stream);
      break;
    default:
      break;  // WMMA takes 16-bit operands only
  }
  if (status != cudaSuccess) return status;
  return launch_scores_for_operand(operand, xdt, dy, decay, d_scores, shape, stream);
}

}  // namespace triax::mamba2::kernels
