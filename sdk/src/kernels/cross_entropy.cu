// The softmax statistics and the logits gradient of the cross-entropy, over one chunk of logits
// (fused_linear_cross_entropy.cpp). One thread block per row: the row is read twice (its max,
// then the sum of exponentials) and, for the gradient, read and overwritten once.
#include <cmath>

#include "kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kMaxThreads = 512;

template <typename T, int N>
__global__ void cross_entropy_stats_kernel(const T* __restrict__ logits, int64_t rows, int64_t cols, int64_t stride,
                                           const int64_t* __restrict__ label, float* __restrict__ row_max,
                                           float* __restrict__ sum_exp, float* __restrict__ label_logit) {
  __shared__ float scratch[33];
  const int64_t packs = cols / N;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* z = logits + row * stride;
    float m = -INFINITY;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> v = load_pack<T, N>(z + p * N);
#pragma unroll
      for (int k = 0; k < N; ++k) m = fmaxf(m, to_float(v.v[k]));
    }
    m = block_reduce(m, scratch, MaxOp{}, -INFINITY);
    float s = 0.f;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> v = load_pack<T, N>(z + p * N);
#pragma unroll
      for (int k = 0; k < N; ++k) s += expf(to_float(v.v[k]) - m);
    }
    s = block_reduce(s, scratch, SumOp{}, 0.f);
    if (threadIdx.x == 0) {
      row_max[row] = m;
      sum_exp[row] = s;
      const int64_t l = label[row];
      label_logit[row] = l >= 0 ? to_float(z[l]) : 0.f;
    }
  }
}

template <typename T, int N>
__global__ void cross_entropy_gradient_kernel(T* __restrict__ logits, int64_t rows, int64_t cols, int64_t stride,
                                              const int64_t* __restrict__ label, const float* __restrict__ row_max,
                                              const float* __restrict__ sum_exp, const float* __restrict__ scale) {
  const int64_t packs = cols / N;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    T* z = logits + row * stride;
    const float m = row_max[row], s = sum_exp[row], factor = scale[row];
    const int64_t l = label[row];
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> v = load_pack<T, N>(z + p * N);
      Pack<T, N> out;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        float probability = expf(to_float(v.v[k]) - m) / s;
        if (p * N + k == l) probability -= 1.f;
        out.v[k] = from_float<T>(probability * factor);
      }
      store_pack<T, N>(z + p * N, out);
    }
  }
}

}  // namespace

cudaError_t cross_entropy_stats(Dtype dtype, const void* logits, int64_t rows, int64_t cols, int64_t stride,
                                const int64_t* label, float* row_max, float* sum_exp, float* label_logit,
                                cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (cols < 1 || stride < cols) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* z = static_cast<const T*>(logits);
    const unsigned grid = grid_for(rows, 1, int64_t{1} << 30);
    constexpr int V = kVectorWidth<T>;
    if (vectorizable<T>(cols, {logits}) && stride % V == 0)
      cross_entropy_stats_kernel<T, V><<<grid, row_threads(cols / V, kMaxThreads), 0, stream>>>(
          z, rows, cols, stride, label, row_max, sum_exp, label_logit);
    else
      cross_entropy_stats_kernel<T, 1><<<grid, row_threads(cols, kMaxThreads), 0, stream>>>(
          z, rows, cols, stride, label, row_max, sum_exp, label_logit);
    return cudaGetLastError();
  });
}

cudaError_t cross_entropy_gradient(Dtype dtype, void* logits, int64_t rows, int64_t cols, int64_t stride,
                                   const int64_t* label, const float* row_max, const float* sum_exp, const float* scale,
                                   cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (cols < 1 || stride < cols) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* z = static_cast<T*>(logits);
    const unsigned grid = grid_for(rows, 1, int64_t{1} << 30);
    constexpr int V = kVectorWidth<T>;
    if (vectorizable<T>(cols, {logits}) && stride % V == 0)
      cross_entropy_gradient_kernel<T, V><<<grid, row_threads(cols / V, kMaxThreads), 0, stream>>>(
          z, rows, cols, stride, label, row_max, sum_exp, scale);
    else
      cross_entropy_gradient_kernel<T, 1>
          <<<grid, row_threads(cols, kMaxThreads), 0, stream>>>(z, rows, cols, stride, label, row_max, sum_exp, scale);
    return cudaGetLastError();
  });
}

}  // namespace triax::kernels
