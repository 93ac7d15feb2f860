// Scaling into fp8 (fp8_matmul.cpp's quantise): out = fp8(x * multiplier), the multiplier read
// from device memory (the scale computed on the GPU from the amax, no host round trip), one per
// tensor, per row or per column. One pass: 16-byte vectors of x in, fp8 bytes out, rounded to
// nearest even with saturation to the format's largest finite value, as LibTorch's cast rounds.
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

}  // namespace

cudaError_t scale_to_fp8(Dtype dtype, const void* x, const float* multiplier, int64_t multiplier_row_stride,
                         int64_t multiplier_col_stride, bool e5m2, void* out, int64_t rows, int64_t cols,
                         cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
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
