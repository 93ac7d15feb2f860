// The fused chunk scan's backward through the intra-chunk term y = M xdt per head, M = L o S with
// S = C B^T (the group's scores) and L_ij = exp(decay_i - decay_j) for i >= j, else 0
// (ssd_kernels.hpp), in two kernels on tensor cores, neither writing a [b, c, g, r, q, q] tensor.
// This one, columns: one block per (batch, chunk, group, head, tile of 64 columns j); it walks the
// row tiles i >= j. Per row tile, each warp forms 16 rows of dM = dy xdt^T (fp32), then, with S
// read from global memory (the group's, as the forward reads it), M (rounded to the operand type,
// as the forward rounds it) and G = dM L S; G's row sums go out per column tile (row_partials), its
// column sums build up in shared memory; after a barrier each warp adds M^T dy to its 16 columns'
// d_xdt, kept in accumulator fragments to the end. The loads are kept off the critical path:
//   - the next row tile's dy is loaded by cp.async (double buffering, the second buffer in the
//     fp32 scratch rows, which only the end uses) while this tile's products and mask run;
//   - each lane holds the S values of its 2 columns of the warp's 16 rows of the next row tile in
//     registers, loaded (32 coalesced loads a lane, all in flight) before this tile's products,
//     so the mask waits on no global load.
// Offsets within a block are int32 (chunk_scan_supports bounds them); the block's bases int64.
#include "ssd_chunk_scan.cuh"
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace scan_tiles;  // NOLINT: the fragments, tile sizes and helpers of ssd_chunk_scan.cuh

constexpr int kTileFrags = kRows / 16;  // a tile's columns in fragments

// S at the warp's 16 rows (the first at rows, stride q) and the lane's columns j0 + lane, j0 +
// lane + 32; the rows above the diagonal are loaded too (S is whole: they exist), never used.
__device__ inline void load_column_scores(float (&into)[16][2], const float* __restrict__ rows, int q, int j0,
                                          int lane) {
#pragma unroll
  for (int row = 0; row < 16; ++row)
#pragma unroll
    for (int half = 0; half < 2; ++half) into[row][half] = __ldg(rows + row * q + j0 + lane + 32 * half);
}

template <typename T, int kPFrags>
__global__ void __launch_bounds__(kThreads, kMinBlocks<kPFrags>)
    chunk_scan_columns_kernel(const T* __restrict__ xdt, const T* __restrict__ dy, const float* __restrict__ scores,
                              const float* __restrict__ decay, float* __restrict__ d_xdt,
                              float* __restrict__ row_partials, float* __restrict__ column_sums, ChunkScanShape s) {
  constexpr int p = kPFrags * 16;
  extern __shared__ __align__(128) unsigned char shared[];
  const ColumnsLayout layout = columns_layout(p, s.positions);
  float* scratch_tile = reinterpret_cast<float*>(shared + layout.scratch);
  T* const dy_first = reinterpret_cast<T*>(shared + layout.dy), *const dy_second = reinterpret_cast<T*>(scratch_tile);
  T* x_tile = reinterpret_cast<T*>(shared + layout.x);
  T* masked_tile = reinterpret_cast<T*>(shared + layout.masked);
  float* d_masked_tile = reinterpret_cast<float*>(shared + layout.d_masked);
  float* decays = reinterpret_cast<float*>(shared + layout.decay);
  float* columns = reinterpret_cast<float*>(shared + layout.columns);  // [kWarps][kRows]

  const int q = static_cast<int>(s.positions), r = static_cast<int>(s.heads), rp = r * p;
  const int tiles = q / kRows;
  const int column_tile = blockIdx.x % tiles, j0 = column_tile * kRows;
  const int head = (blockIdx.x / tiles) % r;          // within the group
  const int64_t block = blockIdx.x / (tiles * r);     // (batch, chunk, group) flattened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = warp * 16;  // the warp's rows of a row tile, then its columns of the column tile

  const T* dy_head = dy + block * q * rp + head * p;  // position i's row at i rp
  const T* x_head = xdt + block * q * rp + head * p;
  const float* block_scores = scores + block * q * q;
  const int64_t head_row = (block * r + head) * q;  // the head's decays, partials and sums

  // Loads in flight together: the xdt tile and first dy tile (cp.async), the first row tile's
  // scores (registers), the decays.
  copy_rows_async(x_tile, layout.ld_head, x_head + j0 * rp, rp, kRows, p);
  copy_rows_async(dy_first, layout.ld_head, dy_head + j0 * rp, rp, kRows, p);
  float tile_scores[16][2];
  load_column_scores(tile_scores, block_scores + (j0 + row0) * q, q, j0, lane);
  for (int i = threadIdx.x; i < q; i += blockDim.x) decays[i] = decay[head_row + i];
  for (int k = threadIdx.x; k < kWarps * kRows; k += blockDim.x) columns[k] = 0.f;
  wait_async_copies();
  __syncthreads();

  float* d_masked = d_masked_tile + row0 * layout.ld_scratch;  // the warp's own 16 rows
  T* masked = masked_tile + row0 * layout.ld_tile;             // the warp's own 16 rows
  float* own_columns = columns + warp * kRows;
  Accumulator acc[kPFrags];  // d_xdt of the warp's 16 columns
#pragma unroll
  for (int f = 0; f < kPFrags; ++f) wmma::fill_fragment(acc[f], 0.f);

  // The row tiles' dy in dy_first, dy_second in turn (selected, not indexed: an indexed pair of
  // pointers lives in local memory); rows above the column tile are masked out.
  bool second = false;
  for (int i0 = j0; i0 < q; i0 += kRows, second = !second) {
    const bool more = i0 + kRows < q;
    if (more) copy_rows_async(second ? dy_first : dy_second, layout.ld_head, dy_head + (i0 + kRows) * rp, rp, kRows, p);
    const T* dy_tile = second ? dy_second : dy_first;

    Accumulator tile[kTileFrags];
    product_transposed_rows<T, kTileFrags>(tile, d_masked, layout.ld_scratch, dy_tile + row0 * layout.ld_head, x_tile,
                                           layout.ld_head, p);
#pragma unroll
    for (int row = 0; row < 16; ++row) {
      const int i = i0 + row0 + row;
      const float row_sum =
          masked_and_gradient_row(masked + row * layout.ld_tile, d_masked + row * layout.ld_scratch, own_columns,
                                  decays, i, j0, [&](int half) { return tile_scores[row][half]; });
      if (lane == 0) row_partials[(head_row + i) * tiles + column_tile] = row_sum;
    }
    if (more) load_column_scores(tile_scores, block_scores + (i0 + kRows + row0) * q, q, j0, lane);
    __syncthreads();  // M whole: each warp now reads all its rows for its own columns

    // d_xdt[j] += sum_i M_ij dy_i (M's columns as a column-major A fragment, the products
    // above the warp's own columns' rows skipped on the diagonal tile).
    accumulate_product<T, wmma::col_major>(acc, masked_tile + row0, layout.ld_tile, dy_tile, layout.ld_head,
                                           i0 == j0 ? row0 : 0, kRows);
    wait_async_copies();
    __syncthreads();  // the next dy tile landed; every warp done with this one and with M
  }

  // Out: the scratch rows (no dy tile lives there any more) carry the warp's d_xdt.
  write_column_outputs(scratch_tile + row0 * layout.ld_scratch, layout.ld_scratch, acc,
                       d_xdt + (block * q + j0 + row0) * rp + head * p, rp, columns, column_sums + head_row + j0);
}

template <typename T, typename /* no y */, int kPFrags>
struct LaunchColumns {
  static cudaError_t run(const void* xdt, const void* dy, const float* scores, const float* decay, float* d_xdt,
                         float* row_partials, float* column_sums, ChunkScanShape s, cudaStream_t stream) {
    return launch_tiles(chunk_scan_columns_kernel<T, kPFrags>, columns_layout(s.head_dim, s.positions).total, s, stream,
                        static_cast<const T*>(xdt), static_cast<const T*>(dy), scores, decay, d_xdt, row_partials,
                        column_sums);
  }
};

}  // namespace

cudaError_t chunk_scan_columns(triax::kernels::Dtype operand, const void* xdt, const void* dy, const float* scores,
                               const float* decay, float* d_xdt, float* row_partials, float* column_sums,
                               const ChunkScanShape& shape, cudaStream_t stream) {
  return launch_supported<LaunchColumns>(operand, operand, shape, stream, xdt, dy, scores, decay, d_xdt, row_partials,
                                         column_sums);
}

}  // namespace triax::mamba2::kernels
