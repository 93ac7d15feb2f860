// Scaling into fp8 (fp8_matmul.cpp's quantise): out = fp8(x * multiplier), the multiplier read
// from device memory (the scale computed on the GPU from the amax, no host round trip), one per
// tensor, per row or per column; rounded to nearest even with saturation to the format's largest
// finite value, as LibTorch's cast rounds. Row-major only: 16-byte vectors of x in, fp8 bytes
// out. With the transpose (cuBLASLt's fp8 products read both operands along the contraction, so
// backward needs the operands of forward transposed): 32 x 32 tiles through shared memory, the
// row-major output written too when asked, from the same read.
#include <cuda_fp8.h>

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

}  // namespace

cudaError_t scale_to_fp8(Dtype dtype, const void* x, const float* multiplier, int64_t multiplier_row_stride,
                         int64_t multiplier_col_stride, bool e5m2, void* out, void* out_t, int64_t rows, int64_t cols,
                         cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (out_t != nullptr) {
      const dim3 threads(kTile, kTileRows);
      const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                      static_cast<unsigned>(std::min<int64_t>((rows + kTile - 1) / kTile, kMaxRowBlocks)));
      auto kernel = e5m2 ? scale_to_fp8_transposed_kernel<T, __nv_fp8_e5m2> : scale_to_fp8_transposed_kernel<T, __nv_fp8_e4m3>;
      kernel<<<grid, threads, 0, stream>>>(static_cast<const T*>(x), multiplier, multiplier_row_stride,
                                           multiplier_col_stride, static_cast<uint8_t*>(out),
                                           static_cast<uint8_t*>(out_t), rows, cols);
      return cudaGetLastError();
    }
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
