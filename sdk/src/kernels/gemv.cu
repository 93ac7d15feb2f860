// y = x w^T for a few rows of x (decoding at batch <= 4): one warp per output feature reads its
// row of w once, in 16-byte vectors, for every row of x, and reduces over its lanes. At one row
// the product is a matrix-vector one, bound by reading w; a GEMM library may tile it for larger
// batches and read w at a fraction of the bandwidth.
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <typename T, int R>
__global__ void gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t out_features,
                            int64_t in_features) {
  constexpr int V = kVectorWidth<T>;
  const int64_t feature = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (feature >= out_features) return;
  const T* row = w + feature * in_features;
  float sums[R] = {};
#pragma unroll 4
  for (int64_t i = static_cast<int64_t>(lane) * V; i < in_features; i += 32 * V) {
    const Pack<T, V> weights = load_pack<T, V>(row + i);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const Pack<T, V> inputs = load_pack<T, V>(x + r * in_features + i);
#pragma unroll
      for (int k = 0; k < V; ++k) sums[r] += to_float(weights.v[k]) * to_float(inputs.v[k]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float total = warp_reduce(sums[r], SumOp());
    if (lane == 0) y[r * out_features + feature] = from_float<T>(total);
  }
}

template <typename T, int R>
void launch(const void* x, const void* w, void* y, int64_t out_features, int64_t in_features, cudaStream_t stream) {
  const unsigned grid = grid_for(out_features, kWarpsPerBlock);
  gemv_kernel<T, R><<<grid, kWarpsPerBlock * 32, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                              static_cast<T*>(y), out_features, in_features);
}

}  // namespace

bool gemv_applies(int64_t rows, int64_t in_features, int element_size, const void* x, const void* w, const void* y) {
  return rows >= 1 && rows <= kGemvMaxRows && in_features % (16 / element_size) == 0 && aligned16(x) &&
         aligned16(w) && aligned16(y);
}

cudaError_t gemv(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                 int64_t in_features, cudaStream_t stream) {
  if (rows < 1 || rows > kGemvMaxRows) return cudaErrorInvalidValue;
  if (out_features == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Launch = void (*)(const void*, const void*, void*, int64_t, int64_t, cudaStream_t);
    // The rows of x as a template argument: their sums stay in registers.
    constexpr Launch by_rows[kGemvMaxRows] = {launch<T, 1>, launch<T, 2>, launch<T, 3>, launch<T, 4>};
    by_rows[rows - 1](x, w, y, out_features, in_features, stream);
    return cudaGetLastError();
  });
}

}  // namespace triax::kernels
