// The add of a 16-bit layer output to a residual stream kept in fp32: out = residual + y in fp32,
// y widened exactly, so the bits of LibTorch's mixed-dtype add, whose TensorIterator kernel for
// mixed dtypes reads element by element. Here a thread takes N elements at a time (one 16-byte
// load of y, 16-byte loads and stores of the fp32 sides) in a grid-stride loop, the last
// count % N elements one at a time.
#include <cstdint>

#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kThreads = 256;

// kVectors: N = kVectorWidth<T> elements at a time (all three pointers 16-byte aligned); else one.
template <typename T, bool kVectors>
__global__ void add_to_fp32_residual_kernel(const float* __restrict__ residual, const T* __restrict__ y,
                                            float* __restrict__ out, int64_t count) {
  constexpr int N = kVectorWidth<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = kVectors ? count / N : 0;
  if constexpr (kVectors) {
    for (int64_t p = first; p < packs; p += stride) {
      float r[N], v[N];
      load_floats<float, N>(residual + p * N, r);
      load_floats<T, N>(y + p * N, v);
#pragma unroll
      for (int k = 0; k < N; ++k) r[k] += v[k];
      store_floats<float, N>(out + p * N, r);
    }
  }
  for (int64_t i = packs * N + first; i < count; i += stride) out[i] = residual[i] + to_float(y[i]);
}

}  // namespace

cudaError_t add_to_fp32_residual(Dtype dtype, const float* residual, const void* y, float* out, int64_t count,
                                 cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // N elements of T fill whole 16-byte vectors of fp32 too (8 for 16-bit y, 4 for fp32).
    constexpr int N = kVectorWidth<T>;
    const bool vectors = aligned16(residual) && aligned16(y) && aligned16(out);
    const unsigned grid = grid_for(vectors ? count / N + 1 : count, kThreads, int64_t{1} << 16);
    if (vectors)
      add_to_fp32_residual_kernel<T, true>
          <<<grid, kThreads, 0, stream>>>(residual, static_cast<const T*>(y), out, count);
    else
      add_to_fp32_residual_kernel<T, false>
          <<<grid, kThreads, 0, stream>>>(residual, static_cast<const T*>(y), out, count);
    return cudaGetLastError();
  });
}

}  // namespace triax::kernels
