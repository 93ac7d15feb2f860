// The fp8 casts of the grouped products' operands (fp8_grouped_casts.cpp, the MoE experts in fp8):
// rowwise (x and gy for forward and grad_x, the weights over K) and per column of each row group
// with the transpose (gy and x for grad_W, the weights over N for grad_x), each replacing
// LibTorch's chain of reductions, elementwise scale ops, the cast and the transposed copy with the
// same arithmetic (kernel_utils.cuh's fp8_scale_of, the cast's rounding as fp8_cast.cu's).
#include <cuda_fp8.h>

#include "fp8_cast_tiles.cuh"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace grouped_cast {

constexpr int64_t kBlockRows = 16;  // a group is whole blocks of 16 rows

template <typename T>
__device__ __forceinline__ const T* stacked_row(const StackedRows& x, int64_t r, int64_t cols) {
  if (x.second == nullptr) return static_cast<const T*>(x.first) + r * cols;
  const int64_t per_group = x.first_rows + x.second_rows, g = r / per_group, j = r - g * per_group;
  return j < x.first_rows ? static_cast<const T*>(x.first) + (g * x.first_rows + j) * cols
                          : static_cast<const T*>(x.second) + (g * x.second_rows + j - x.first_rows) * cols;
}

// One group (a dense matrix's columns, fp8_matmul.cpp) skips the 64-bit division, which the
// transposing cast would otherwise run for every row it reads.
__device__ __forceinline__ int64_t group_of(const RowGroupsOnDevice& groups, int64_t block) {
  if (groups.group_of_block != nullptr) return groups.group_of_block[block];
  return groups.count == 1 ? 0 : block * kBlockRows / groups.rows_per_group;
}

// ---- rowwise ---------------------------------------------------------------------------------

constexpr int kRowThreads = 256;
constexpr int kKeptPacks = 4;  // vectors a thread keeps in registers between the amax and the cast
// Rows of up to 32 x kLanePacks vectors (2048 bf16 values) take one warp each, 8 to a block: the
// warp issues all its loads before one shuffle reduction, where a block per row would wait on
// three barriers for 16 bytes a thread.
constexpr int kLanePacks = 8;
constexpr int kWarpRowThreads = 256;

// Row r's vector p, scaled and rounded to F, stored at its place in out.
template <typename T, typename F, int N>
__device__ __forceinline__ void store_cast(const Pack<T, N>& in, float multiplier, uint8_t* __restrict__ out, int64_t r,
                                           int64_t cols, int64_t p) {
  Pack<uint8_t, N> q;
#pragma unroll
  for (int k = 0; k < N; ++k) q.v[k] = F(to_float(in.v[k]) * multiplier).__x;
  store_pack<uint8_t, N>(out + r * cols + p * N, q);
}

template <typename T, int N>
__device__ __forceinline__ float pack_amax(float m, const Pack<T, N>& in) {
#pragma unroll
  for (int k = 0; k < N; ++k) m = abs_max(m, to_float(in.v[k]));
  return m;
}

template <typename T, typename F>
__global__ void __launch_bounds__(kRowThreads)
    rowwise_cast_kernel(const StackedRows x, int64_t rows, int64_t cols, float largest, float amax_floor,
                        uint8_t* __restrict__ out, float* __restrict__ scale) {
  constexpr int N = kVectorWidth<T>;
  __shared__ float scratch[33];
  const int64_t packs = cols / N, stride = blockDim.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = stacked_row<T>(x, r, cols);
    Pack<T, N> kept[kKeptPacks];
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < kKeptPacks; ++j) {
      const int64_t p = threadIdx.x + j * stride;
      if (p >= packs) continue;
      kept[j] = load_pack<T, N>(row + p * N);
      m = pack_amax(m, kept[j]);
    }
    // Rows longer than the registers hold are read again (from L1/L2: the block just read them).
    for (int64_t p = threadIdx.x + kKeptPacks * stride; p < packs; p += stride)
      m = pack_amax(m, load_pack<T, N>(row + p * N));
    const Fp8Scale s = fp8_scale_of(block_reduce(m, scratch, NanMaxOp(), 0.0f), largest, amax_floor);
    if (threadIdx.x == 0) scale[r] = s.scale;
#pragma unroll
    for (int j = 0; j < kKeptPacks; ++j)
      if (threadIdx.x + j * stride < packs)
        store_cast<T, F, N>(kept[j], s.multiplier, out, r, cols, threadIdx.x + j * stride);
    for (int64_t p = threadIdx.x + kKeptPacks * stride; p < packs; p += stride)
      store_cast<T, F, N>(load_pack<T, N>(row + p * N), s.multiplier, out, r, cols, p);
  }
}

// The same for rows of at most 32 x kLanePacks vectors, a warp each.
template <typename T, typename F>
__global__ void __launch_bounds__(kWarpRowThreads)
    rowwise_cast_warp_kernel(const StackedRows x, int64_t rows, int64_t cols, float largest, float amax_floor,
                             uint8_t* __restrict__ out, float* __restrict__ scale) {
  constexpr int N = kVectorWidth<T>;
  constexpr int64_t kWarps = kWarpRowThreads / 32;
  const int lane = threadIdx.x % 32;
  const int64_t packs = cols / N;
  for (int64_t r = blockIdx.x * kWarps + threadIdx.x / 32; r < rows; r += gridDim.x * kWarps) {
    const T* row = stacked_row<T>(x, r, cols);
    Pack<T, N> kept[kLanePacks];
#pragma unroll
    for (int j = 0; j < kLanePacks; ++j)
      if (lane + j * 32 < packs) kept[j] = load_pack<T, N>(row + (lane + j * 32) * N);
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < kLanePacks; ++j)
      if (lane + j * 32 < packs) m = pack_amax(m, kept[j]);
    const Fp8Scale s = fp8_scale_of(warp_reduce(m, NanMaxOp()), largest, amax_floor);
    if (lane == 0) scale[r] = s.scale;
#pragma unroll
    for (int j = 0; j < kLanePacks; ++j)
      if (lane + j * 32 < packs) store_cast<T, F, N>(kept[j], s.multiplier, out, r, cols, lane + j * 32);
  }
}

// ---- per column of each row group --------------------------------------------------------------

constexpr int kAmaxThreads = 64;         // 8 columns each
constexpr int64_t kAmaxChunkBlocks = 4;  // 16-row blocks a thread reduces before its atomics

// amax[g * cols + c] = max |x[r, c]| over group g's rows (amax zero before the launch). A thread
// keeps 8 columns' maxima over a chunk of blocks and folds them in when the group changes or the
// chunk ends: a group's maxima meet by atomics (atomic_amax, exact in any order).
template <typename T>
__global__ void __launch_bounds__(kAmaxThreads)
    group_column_amax_kernel(const StackedRows x, int64_t rows, int64_t cols, const RowGroupsOnDevice groups,
                             float* __restrict__ amax) {
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * kAmaxThreads + threadIdx.x) * 8;
  if (c >= cols) return;
  const int64_t blocks = rows / kBlockRows;
  for (int64_t b0 = blockIdx.y * kAmaxChunkBlocks; b0 < blocks; b0 += gridDim.y * kAmaxChunkBlocks) {
    float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t group = group_of(groups, b0);
    auto fold = [&] {
#pragma unroll
      for (int k = 0; k < 8; ++k) atomic_amax(amax + group * cols + c + k, m[k]), m[k] = 0.0f;
    };
    const int64_t chunk_end = b0 + kAmaxChunkBlocks < blocks ? b0 + kAmaxChunkBlocks : blocks;
    for (int64_t b = b0; b < chunk_end; ++b) {
      const int64_t g = group_of(groups, b);
      if (g != group) fold(), group = g;
#pragma unroll  // a block's 16 loads issued before their maxima
      for (int64_t r = b * kBlockRows; r < (b + 1) * kBlockRows; ++r) {
        float v[8];
        load_floats<T, 8>(stacked_row<T>(x, r, cols) + c, v);
#pragma unroll
        for (int k = 0; k < 8; ++k) m[k] = abs_max(m[k], v[k]);
      }
    }
    fold();
  }
}

// In place: scale[i] (holding the amax) becomes the scale, multiplier[i] its multiplier.
__global__ void scales_from_amax_kernel(float* __restrict__ scale, float* __restrict__ multiplier, int64_t count,
                                        float largest, float amax_floor) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Fp8Scale s = fp8_scale_of(scale[i], largest, amax_floor);
    scale[i] = s.scale;
    multiplier[i] = s.multiplier;
  }
}

// fp8_cast_tiles.cuh's tiles of the stacked rows, each row scaled by its group's multipliers,
// stored transposed only.
template <typename T>
struct GroupColumnTiles {
  StackedRows x;
  const float* multiplier;  // [groups, cols]
  RowGroupsOnDevice groups;
  bool per_group_transpose;
  uint8_t* out_t;
  int64_t rows, cols;

  __device__ const T* row(int64_t r) const { return stacked_row<T>(x, r, cols); }
  __device__ void multipliers(int64_t r, int64_t c, float (&m)[8]) const {
    load_floats<float, 8>(multiplier + group_of(groups, r / kBlockRows) * cols + c, m);
  }
  __device__ uint8_t* row_major(int64_t) const { return nullptr; }
  __device__ uint8_t* transposed(int64_t c, int64_t r) const {
    if (!per_group_transpose) return out_t + c * rows + r;
    const int64_t n = groups.rows_per_group, g = r / n;
    return out_t + (g * cols + c) * n + (r - g * n);
  }
};

bool aligned_rows(const StackedRows& x) { return aligned16(x.first) && (x.second == nullptr || aligned16(x.second)); }

}  // namespace grouped_cast

cudaError_t fp8_rowwise_cast(Dtype dtype, StackedRows x, int64_t rows, int64_t cols, float largest, float amax_floor,
                             void* out, float* scale, cudaStream_t stream) {
  using namespace grouped_cast;
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (cols % 8 != 0 || !aligned_rows(x) || !aligned16(out) || !aligned16(scale)) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t packs = cols / kVectorWidth<T>;
    auto* bytes = static_cast<uint8_t*>(out);
    if (packs <= 32 * kLanePacks) {
      rowwise_cast_warp_kernel<T, __nv_fp8_e4m3><<<grid_for(rows, kWarpRowThreads / 32), kWarpRowThreads, 0, stream>>>(
          x, rows, cols, largest, amax_floor, bytes, scale);
    } else {
      rowwise_cast_kernel<T, __nv_fp8_e4m3><<<grid_for(rows, 1), row_threads(packs, kRowThreads), 0, stream>>>(
          x, rows, cols, largest, amax_floor, bytes, scale);
    }
    return cudaGetLastError();
  });
}

cudaError_t fp8_group_column_cast(Dtype dtype, StackedRows x, int64_t rows, int64_t cols, RowGroupsOnDevice groups,
                                  bool per_group_transpose, float largest, float amax_floor, float* workspace,
                                  void* out_t, float* scale, cudaStream_t stream) {
  using namespace grouped_cast;
  if (rows == 0 || cols == 0) return cudaSuccess;
  const bool uniform = groups.group_of_block == nullptr;
  if (rows % kBlockRows != 0 || cols % 8 != 0 || !aligned_rows(x) || !aligned16(out_t) || !aligned16(scale) ||
      !aligned16(workspace) || (uniform && (groups.rows_per_group <= 0 || groups.rows_per_group % kBlockRows != 0)) ||
      (per_group_transpose && !uniform))
    return cudaErrorInvalidValue;
  const int64_t count = groups.count * cols;
  if (const cudaError_t cleared = cudaMemsetAsync(scale, 0, count * sizeof(float), stream); cleared != cudaSuccess)
    return cleared;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int64_t kMaxRowBlocks = 65535;  // gridDim.y's limit
    const dim3 amax_grid(grid_for(cols, kAmaxThreads * 8),
                         static_cast<unsigned>(std::min<int64_t>(
                             (rows / kBlockRows + kAmaxChunkBlocks - 1) / kAmaxChunkBlocks, kMaxRowBlocks)));
    group_column_amax_kernel<T><<<amax_grid, kAmaxThreads, 0, stream>>>(x, rows, cols, groups, scale);
    if (const cudaError_t launched = cudaGetLastError(); launched != cudaSuccess) return launched;
    scales_from_amax_kernel<<<grid_for(count, 256, 1024), 256, 0, stream>>>(scale, workspace, count, largest,
                                                                            amax_floor);
    if (const cudaError_t launched = cudaGetLastError(); launched != cudaSuccess) return launched;
    const GroupColumnTiles<T> tiles{x,    workspace, groups, per_group_transpose, static_cast<uint8_t*>(out_t),
                                    rows, cols};
    fp8_tiles::scale_to_fp8_tiles_kernel<T, __nv_fp8_e4m3, GroupColumnTiles<T>>
        <<<fp8_tiles::grid_of(tiles), fp8_tiles::kThreads, 0, stream>>>(tiles);
    return cudaGetLastError();
  });
}

}  // namespace triax::kernels
