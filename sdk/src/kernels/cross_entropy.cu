// The softmax statistics and the logits gradient of the cross-entropy, over one chunk of logits
// (fused_linear_cross_entropy.cpp). One thread block per row: the row is read once for its max
// and sum of exponentials (each thread keeps a running max and rescales its sum when the max
// grows) and, for the gradient, read and overwritten once.
#include <cmath>

#include "triax/kernels/kernel_utils.cuh"

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
    // One pass over the row, not two: with several 96 KB rows (vocabulary 49,152) in flight on
    // every SM, L2 cannot be counted on to still hold a row for a second read.
    float thread_max = -INFINITY, thread_sum = 0.f;  // thread_sum: of exp(z - thread_max)
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> v = load_pack<T, N>(z + p * N);
      float pack_max = -INFINITY;
#pragma unroll
      for (int k = 0; k < N; ++k) pack_max = fmaxf(pack_max, to_float(v.v[k]));
      const float new_max = fmaxf(thread_max, pack_max);
      // exp(-inf - -inf) would be NaN: a thread's first pack (or a row of -inf) starts from 0.
      float pack_sum = thread_max == -INFINITY ? 0.f : thread_sum * expf(thread_max - new_max);
#pragma unroll
      for (int k = 0; k < N; ++k) pack_sum += new_max == -INFINITY ? 0.f : expf(to_float(v.v[k]) - new_max);
      thread_max = new_max;
      thread_sum = pack_sum;
    }
    const float m = block_reduce(thread_max, scratch, MaxOp{}, -INFINITY);
    const float rescaled = thread_max == -INFINITY ? 0.f : thread_sum * expf(thread_max - m);
    const float s = block_reduce(rescaled, scratch, SumOp{}, 0.f);
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
