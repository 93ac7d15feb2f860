// Causal depthwise conv1d (+ SiLU), forward and backward. A thread computes a run of kRun
// consecutive positions of one row from a window of inputs in registers; the taps are aligned to
// the right end of a kMaxConvWidth window (zero weights in front for shorter kernels), so every
// register index is a compile-time constant. The backward pass gives each channel one thread
// block, which sums the weight and bias gradients over the batch and the sequence itself (no
// atomics, the same order on every run).
#include "scan_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba::kernels {
namespace {

using triax::kernels::block_reduce;
using triax::kernels::from_float;
using triax::kernels::SumOp;
using triax::kernels::to_float;

constexpr int kRun = 8;
constexpr int kWidth = static_cast<int>(kMaxConvWidth);
constexpr int kThreads = 256;

// w[jj] multiplies x[t - (kWidth - 1) + jj] in y[t].
__device__ __forceinline__ void aligned_taps(const float* weight, int64_t channel, int width, float (&w)[kWidth]) {
#pragma unroll
  for (int jj = 0; jj < kWidth; ++jj) {
    const int j = jj - (kWidth - width);
    w[jj] = j >= 0 ? weight[channel * width + j] : 0.f;
  }
}

// window[i] = x[first + i], zero outside [0, length).
template <typename T, int N>
__device__ __forceinline__ void load_window(const T* row, int64_t first, int64_t length, float (&window)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int64_t p = first + i;
    window[i] = p >= 0 && p < length ? to_float(row[p]) : 0.f;
  }
}

__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + __expf(-v)); }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    conv_forward_kernel(const T* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
                        T* __restrict__ y, int64_t rows, int64_t channels, int64_t length, int width, bool silu) {
  const int64_t runs = (length + kRun - 1) / kRun;
  for (int64_t unit = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; unit < rows * runs;
       unit += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = unit / runs, t0 = (unit % runs) * kRun, channel = row % channels;
    float w[kWidth];
    aligned_taps(weight, channel, width, w);
    const float b = bias ? bias[channel] : 0.f;
    float window[kRun + kWidth - 1];
    load_window(x + row * length, t0 - (kWidth - 1), length, window);
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      if (t0 + i >= length) break;
      float acc = b;
#pragma unroll
      for (int jj = 0; jj < kWidth; ++jj) acc += w[jj] * window[i + jj];
      if (silu) acc *= sigmoid(acc);
      y[row * length + t0 + i] = from_float<T>(acc);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    conv_backward_kernel(const T* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
                         const T* __restrict__ grad_y, T* __restrict__ grad_x, float* __restrict__ grad_weight,
                         float* __restrict__ grad_bias, int64_t batch, int64_t channels, int64_t length, int width,
                         bool silu) {
  __shared__ float scratch[33];
  const int64_t channel = blockIdx.x, runs = (length + kRun - 1) / kRun;
  float w[kWidth];
  aligned_taps(weight, channel, width, w);
  const float b = bias ? bias[channel] : 0.f;
  float dw[kWidth] = {}, db = 0.f;
  for (int64_t unit = threadIdx.x; unit < batch * runs; unit += blockDim.x) {
    const int64_t row = (unit / runs) * channels + channel, t0 = (unit % runs) * kRun;
    // Pre-activation gradients at positions t0 .. t0 + kRun + kWidth - 2 (those reading x[t0..]).
    constexpr int kGrads = kRun + kWidth - 1;
    float window[kGrads + kWidth - 1];
    load_window(x + row * length, t0 - (kWidth - 1), length, window);
    float pre_grad[kGrads];
    load_window(grad_y + row * length, t0, length, pre_grad);
    if (silu) {
#pragma unroll
      for (int q = 0; q < kGrads; ++q) {
        float pre = b;
#pragma unroll
        for (int jj = 0; jj < kWidth; ++jj) pre += w[jj] * window[q + jj];
        const float s = sigmoid(pre);
        pre_grad[q] *= s * (1.f + pre * (1.f - s));
      }
    }
    // x[t0 + i] feeds y[t0 + i + (kWidth - 1) - jj] through w[jj].
    T* gx = grad_x + row * length;
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      if (t0 + i >= length) break;
      float acc = 0.f;
#pragma unroll
      for (int jj = 0; jj < kWidth; ++jj) acc += w[jj] * pre_grad[i + (kWidth - 1) - jj];
      gx[t0 + i] = from_float<T>(acc);
      // This unit's own outputs t0 + i: their taps' weight gradients.
      db += pre_grad[i];
#pragma unroll
      for (int jj = 0; jj < kWidth; ++jj) dw[jj] += pre_grad[i] * window[i + jj];
    }
  }
  for (int jj = 0; jj < kWidth; ++jj) {
    const float total = block_reduce(dw[jj], scratch, SumOp{}, 0.f);
    const int j = jj - (kWidth - width);
    if (threadIdx.x == 0 && j >= 0) grad_weight[channel * width + j] = total;
  }
  const float total_bias = block_reduce(db, scratch, SumOp{}, 0.f);
  if (threadIdx.x == 0 && grad_bias) grad_bias[channel] = total_bias;
}

}  // namespace

cudaError_t causal_conv1d_forward(Dtype dtype, const void* x, const float* weight, const float* bias, void* y,
                                  int64_t batch, int64_t channels, int64_t length, int64_t width, bool silu,
                                  cudaStream_t stream) {
  if (batch == 0 || channels == 0 || length == 0) return cudaSuccess;
  if (width < 1 || width > kMaxConvWidth) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t units = batch * channels * ((length + kRun - 1) / kRun);
    conv_forward_kernel<T><<<triax::kernels::grid_for(units, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), weight, bias, static_cast<T*>(y), batch * channels, channels, length,
        static_cast<int>(width), silu);
    return cudaGetLastError();
  });
}

cudaError_t causal_conv1d_backward(Dtype dtype, const void* x, const float* weight, const float* bias,
                                   const void* grad_y, void* grad_x, float* grad_weight, float* grad_bias,
                                   int64_t batch, int64_t channels, int64_t length, int64_t width, bool silu,
                                   cudaStream_t stream) {
  if (batch == 0 || channels == 0 || length == 0) return cudaSuccess;
  if (width < 1 || width > kMaxConvWidth) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    conv_backward_kernel<T><<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(
        static_cast<const T*>(x), weight, bias, static_cast<const T*>(grad_y), static_cast<T*>(grad_x), grad_weight,
        grad_bias, batch, channels, length, static_cast<int>(width), silu);
    return cudaGetLastError();
  });
}

}  // namespace triax::mamba::kernels
