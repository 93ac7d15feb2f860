// Scaling into fp8 (fp8_matmul.cpp's quantise): out = fp8(x * multiplier), the multiplier read
// from device memory (the scale computed on the GPU from the amax, no host round trip), one per
// tensor, per row or per column; rounded to nearest even with saturation to the format's largest
// finite value, as LibTorch's cast rounds. Row-major only: 16-byte vectors of x in, fp8 bytes
// out. With the transpose (cuBLASLt's fp8 products read both operands along the contraction, so
// backward needs the operands of forward transposed), both layouts from one read: 128 x 64 tiles
// read in 16-byte vectors, the row-major bytes stored from registers, the transposed ones through
// shared memory in 16-byte stores (fp8_cast_tiles.cuh; shapes whose sides are not multiples of 16
// and 8 take a plain 32 x 32 tile kernel).
#include <cuda_fp8.h>

#include "fp8_cast_tiles.cuh"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxRowBlocks = 65535;  // gridDim.y's limit

template <typename T, typename F, int N>
__global__ void scale_to_fp8_kernel(const T* __restrict__ x, const float* __restrict__ multiplier,
                                    int64_t multiplier_row_stride, int64_t multiplier_col_stride,
                                    uint8_t* __restrict__ out, int64_t rows, int64_t cols) {
  const int64_t packs = cols / N;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* row_multiplier = multiplier + r * multiplier_row_stride;
    for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < packs;
         p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const Pack<T, N> in = load_pack<T, N>(x + r * cols + p * N);
      Pack<uint8_t, N> q;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float m = row_multiplier[(p * N + k) * multiplier_col_stride];
        q.v[k] = F(to_float(in.v[k]) * m).__x;
      }
      store_pack<uint8_t, N>(out + r * cols + p * N, q);
    }
  }
}

constexpr int kTile = 32, kTileRows = 8;  // a tile's side; a block is kTile x kTileRows threads

template <typename T, typename F>
__global__ void scale_to_fp8_transposed_kernel(const T* __restrict__ x, const float* __restrict__ multiplier,
                                               int64_t multiplier_row_stride, int64_t multiplier_col_stride,
                                               uint8_t* __restrict__ out, uint8_t* __restrict__ out_t, int64_t rows,
                                               int64_t cols) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile; r0 < rows; r0 += static_cast<int64_t>(gridDim.y) * kTile) {
#pragma unroll
    for (int j = 0; j < kTile; j += kTileRows) {
      const int64_t r = r0 + ty + j, c = c0 + tx;
      if (r < rows && c < cols) {
        const float m = multiplier[r * multiplier_row_stride + c * multiplier_col_stride];
        const uint8_t q = F(to_float(x[r * cols + c]) * m).__x;
        if (out != nullptr) out[r * cols + c] = q;
        tile[ty + j][tx] = q;
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; j += kTileRows) {
      const int64_t c = c0 + ty + j, r = r0 + tx;
      if (r < rows && c < cols) out_t[c * rows + r] = tile[tx][ty + j];
    }
    __syncthreads();
  }
}

// The vectorised transposing kernel's tiles (fp8_cast_tiles.cuh) of a row-major x with strided
// multipliers (rows % 16 == 0, cols % 8 == 0, x 16-byte, out 8-byte and out_t 16-byte aligned).
template <typename T>
struct StridedTiles {
  const T* x;
  const float* multiplier;
  int64_t multiplier_row_stride, multiplier_col_stride;
  uint8_t* out;
  uint8_t* out_t;
  int64_t rows, cols;

  __device__ const T* row(int64_t r) const { return x + r * cols; }
  __device__ void multipliers(int64_t r, int64_t c, float (&m)[8]) const {
    if (multiplier_row_stride == 0 && multiplier_col_stride == 0) {  // one for the tensor
      const float tensor_multiplier = __ldg(multiplier);
#pragma unroll
      for (int k = 0; k < 8; ++k) m[k] = tensor_multiplier;
      return;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) m[k] = multiplier[r * multiplier_row_stride + (c + k) * multiplier_col_stride];
  }
  __device__ uint8_t* row_major(int64_t r) const { return out == nullptr ? nullptr : out + r * cols; }
  __device__ uint8_t* transposed(int64_t c, int64_t r) const { return out_t + c * rows + r; }
};

}  // namespace

cudaError_t scale_to_fp8(Dtype dtype, const void* x, const float* multiplier, int64_t multiplier_row_stride,
                         int64_t multiplier_col_stride, bool e5m2, void* out, void* out_t, int64_t rows, int64_t cols,
                         cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Both layouts: a block per tile of tile_rows x tile_cols.
    auto launch_tiles = [&](auto kernel, dim3 threads, int64_t tile_rows, int64_t tile_cols) {
      const dim3 grid(static_cast<unsigned>((cols + tile_cols - 1) / tile_cols),
                      static_cast<unsigned>(std::min<int64_t>((rows + tile_rows - 1) / tile_rows, kMaxRowBlocks)));
      kernel<<<grid, threads, 0, stream>>>(static_cast<const T*>(x), multiplier, multiplier_row_stride,
                                           multiplier_col_stride, static_cast<uint8_t*>(out),
                                           static_cast<uint8_t*>(out_t), rows, cols);
      return cudaGetLastError();
    };
    const bool vector_tiles = rows % 16 == 0 && cols % 8 == 0 && aligned16(x) && aligned16(out_t) &&
                              reinterpret_cast<std::uintptr_t>(out) % 8 == 0;
    if (out_t != nullptr && vector_tiles) {
      const StridedTiles<T> tiles{static_cast<const T*>(x),
                                  multiplier,
                                  multiplier_row_stride,
                                  multiplier_col_stride,
                                  static_cast<uint8_t*>(out),
                                  static_cast<uint8_t*>(out_t),
                                  rows,
                                  cols};
      auto launch_vector_tiles = [&](auto kernel) {
        kernel<<<fp8_tiles::grid_of(tiles), fp8_tiles::kThreads, 0, stream>>>(tiles);
        return cudaGetLastError();
      };
      return e5m2 ? launch_vector_tiles(fp8_tiles::scale_to_fp8_tiles_kernel<T, __nv_fp8_e5m2, StridedTiles<T>>)
                  : launch_vector_tiles(fp8_tiles::scale_to_fp8_tiles_kernel<T, __nv_fp8_e4m3, StridedTiles<T>>);
    }
    if (out_t != nullptr)
      return e5m2
                 ? launch_tiles(scale_to_fp8_transposed_kernel<T, __nv_fp8_e5m2>, dim3(kTile, kTileRows), kTile, kTile)
                 : launch_tiles(scale_to_fp8_transposed_kernel<T, __nv_fp8_e4m3>, dim3(kTile, kTileRows), kTile, kTile);
    auto launch = [&](auto kernel, int64_t packs) {
      const dim3 threads(static_cast<unsigned>(row_threads(packs, kThreads)));
      const dim3 grid(grid_for(packs, threads.x), static_cast<unsigned>(std::min<int64_t>(rows, kMaxRowBlocks)));
      kernel<<<grid, threads, 0, stream>>>(static_cast<const T*>(x), multiplier, multiplier_row_stride,
                                           multiplier_col_stride, static_cast<uint8_t*>(out), rows, cols);
      return cudaGetLastError();
    };
    // 16 bytes in per vector (8 bf16 or 4 fp32 elements), as many fp8 bytes out.
    constexpr int N = kVectorWidth<T>;
    const bool vectors = cols % N == 0 && aligned16(x) && reinterpret_cast<std::uintptr_t>(out) % N == 0;
    if (e5m2)
      return vectors ? launch(scale_to_fp8_kernel<T, __nv_fp8_e5m2, N>, cols / N)
                     : launch(scale_to_fp8_kernel<T, __nv_fp8_e5m2, 1>, cols);
    return vectors ? launch(scale_to_fp8_kernel<T, __nv_fp8_e4m3, N>, cols / N)
                   : launch(scale_to_fp8_kernel<T, __nv_fp8_e4m3, 1>, cols);
  });
}

}  // namespace triax::kernels
