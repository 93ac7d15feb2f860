// Causal depthwise conv1d (+ SiLU), forward and backward, on the channel-major [b, d, l] layout.
// A thread takes a run of kRun consecutive positions of one row, and the lanes of a warp take
// consecutive runs, so a warp reads 32 * kRun contiguous elements: one 16-byte vector per thread
// where the rows allow it (length a multiple of kRun, aligned rows), else bounds-checked element
// loads. Each input is read from memory once: the kTaps - 1 inputs before a run (its halo) come
// from the lane on the left by a shuffle, and in the backward the pre-activation gradients after
// a run from the lane on the right; only a warp's edge lanes load their halo themselves. The taps
// are aligned to the right end of a kTaps window (zero weights in front for shorter kernels), so
// every register index is a compile-time constant. The backward gives each channel one thread
// block, which sums the weight and bias gradients over the batch and the sequence in registers
// and then over the block (no atomics, the same order on every run).
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "scan_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba::kernels {
namespace {

using triax::kernels::block_reduce;
using triax::kernels::from_float;
using triax::kernels::load_pack;
using triax::kernels::Pack;
using triax::kernels::store_pack;
using triax::kernels::SumOp;
using triax::kernels::to_float;

constexpr int kRun = 8;
constexpr int kForwardThreads = 256;
// Fewer threads per channel's block: at Mamba-130m's 1536 channels every block is resident at once.
constexpr int kBackwardThreads = 128;
constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int64_t kMaxBlocks = (int64_t{1} << 31) - 1;  // of a grid's x dimension
constexpr int64_t kMaxForwardUnits = kMaxBlocks * kForwardThreads;

// w[jj] multiplies x[t - (kTaps - 1) + jj] in y[t].
template <int kTaps>
__device__ __forceinline__ void aligned_taps(const float* weight, int64_t channel, int width, float (&w)[kTaps]) {
#pragma unroll
  for (int jj = 0; jj < kTaps; ++jj) {
    const int j = jj - (kTaps - width);
    w[jj] = j >= 0 ? weight[channel * width + j] : 0.f;
  }
}

// v[i] = row[t0 + i]; element loads read zero past the row's end.
template <typename T, bool kVector>
__device__ __forceinline__ void load_run(const T* row, int64_t t0, int64_t length, float (&v)[kRun]) {
  if constexpr (kVector) {
    const Pack<T, kRun> pack = load_pack<T, kRun>(row + t0);
#pragma unroll
    for (int i = 0; i < kRun; ++i) v[i] = to_float(pack.v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kRun; ++i) v[i] = t0 + i < length ? to_float(row[t0 + i]) : 0.f;
  }
}

template <typename T, bool kVector>
__device__ __forceinline__ void store_run(T* row, int64_t t0, int64_t length, const float (&v)[kRun]) {
  if constexpr (kVector) {
    Pack<T, kRun> pack;
#pragma unroll
    for (int i = 0; i < kRun; ++i) pack.v[i] = from_float<T>(v[i]);
    store_pack<T, kRun>(row + t0, pack);
  } else {
#pragma unroll
    for (int i = 0; i < kRun; ++i)
      if (t0 + i < length) row[t0 + i] = from_float<T>(v[i]);
  }
}

// window = x[t0 - (kTaps - 1) .. t0 + kRun): the run (already in window[kTaps - 1 ..]) and its
// halo, zero before the row's start. The lane on the left holds the previous run of the same row
// whenever t0 > 0 (consecutive units); every lane of the warp takes part in the shuffle.
template <typename T, int kTaps>
__device__ __forceinline__ void fill_left_halo(const T* row, int64_t t0, float (&window)[kRun + kTaps - 1]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < kTaps - 1; ++k) {
    const float from_left = __shfl_up_sync(kFullWarp, window[kRun + k], 1);
    const int64_t p = t0 - (kTaps - 1) + k;
    window[k] = p < 0 ? 0.f : lane > 0 ? from_left : to_float(row[p]);
  }
}

__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + __expf(-v)); }

// The gradient through SiLU at pre-activation `pre`.
__device__ __forceinline__ float silu_slope(float pre) {
  const float s = sigmoid(pre);
  return s * (1.f + pre * (1.f - s));
}

template <int kTaps>
__device__ __forceinline__ float tap_sum(const float (&w)[kTaps], const float* inputs, float bias) {
  float acc = bias;
#pragma unroll
  for (int jj = 0; jj < kTaps; ++jj) acc += w[jj] * inputs[jj];
  return acc;
}

template <typename T, int kTaps, bool kVector>
__global__ void __launch_bounds__(kForwardThreads)
    conv_forward_kernel(const T* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
                        T* __restrict__ y, int64_t rows, int64_t channels, int64_t length, int width, bool silu) {
  const int64_t runs = (length + kRun - 1) / kRun;
  const int64_t unit = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const bool active = unit < rows * runs;  // inactive lanes still join the shuffles
  const int64_t row = active ? unit / runs : 0, t0 = active ? (unit % runs) * kRun : 0;
  float window[kRun + kTaps - 1] = {};
  float run[kRun] = {};
  if (active) load_run<T, kVector>(x + row * length, t0, length, run);
#pragma unroll
  for (int i = 0; i < kRun; ++i) window[kTaps - 1 + i] = run[i];
  fill_left_halo<T, kTaps>(x + row * length, t0, window);
  if (!active) return;
  const int64_t channel = row % channels;
  float w[kTaps];
  aligned_taps(weight, channel, width, w);
  const float b = bias ? bias[channel] : 0.f;
#pragma unroll
  for (int i = 0; i < kRun; ++i) {
    const float acc = tap_sum(w, window + i, b);
    run[i] = silu ? acc * sigmoid(acc) : acc;
  }
  store_run<T, kVector>(y + row * length, t0, length, run);
}

// The pre-activation gradient at position p (< length) of a row, from memory: a warp's last lane
// needs those of the kTaps - 1 positions after its run, which no lane of its warp holds.
template <typename T, int kTaps>
__device__ __forceinline__ float pre_activation_gradient(const T* x_row, const T* grad_row, int64_t p,
                                                         int64_t length, const float (&w)[kTaps], float b,
                                                         bool silu) {
  const float g = to_float(grad_row[p]);
  if (!silu) return g;
  float inputs[kTaps];
#pragma unroll
  for (int jj = 0; jj < kTaps; ++jj) inputs[jj] = to_float(x_row[p - (kTaps - 1) + jj]);  // p >= kRun > kTaps - 1
  return g * silu_slope(tap_sum(w, inputs, b));
}

// One run of the backward: writes grad_x over the run and adds the run's outputs' share of the
// weight and bias gradients to dw and db. `active` false: the lane only takes part in the shuffles.
template <typename T, int kTaps, bool kVector>
__device__ __forceinline__ void conv_backward_run(const T* x_row, const T* grad_row, T* grad_x_row, int64_t t0,
                                                  int64_t length, bool active, const float (&w)[kTaps], float b,
                                                  bool silu, float (&dw)[kTaps], float& db) {
  float window[kRun + kTaps - 1] = {}, run[kRun] = {};
  if (active) load_run<T, kVector>(x_row, t0, length, run);
#pragma unroll
  for (int i = 0; i < kRun; ++i) window[kTaps - 1 + i] = run[i];
  fill_left_halo<T, kTaps>(x_row, t0, window);
  // Pre-activation gradients at t0 .. t0 + kRun + kTaps - 2 (those reading x[t0 .. t0 + kRun)).
  float grad[kRun + kTaps - 1] = {};
  if (active) load_run<T, kVector>(grad_row, t0, length, run);  // zero past the row's end
#pragma unroll
  for (int i = 0; i < kRun; ++i) grad[i] = silu ? run[i] * silu_slope(tap_sum(w, window + i, b)) : run[i];
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < kTaps - 1; ++k) {
    const float from_right = __shfl_down_sync(kFullWarp, grad[k], 1);
    const int64_t p = t0 + kRun + k;
    if (active && p < length)
      grad[kRun + k] = lane < 31 ? from_right : pre_activation_gradient(x_row, grad_row, p, length, w, b, silu);
  }
  if (!active) return;
  // x[t0 + i] feeds y[t0 + i + (kTaps - 1) - jj] through w[jj].
#pragma unroll
  for (int i = 0; i < kRun; ++i) {
    float acc = 0.f;
#pragma unroll
    for (int jj = 0; jj < kTaps; ++jj) acc += w[jj] * grad[i + (kTaps - 1) - jj];
    run[i] = acc;
    db += grad[i];
#pragma unroll
    for (int jj = 0; jj < kTaps; ++jj) dw[jj] += grad[i] * window[i + jj];
  }
  store_run<T, kVector>(grad_x_row, t0, length, run);
}

template <typename T, int kTaps, bool kVector>
__global__ void __launch_bounds__(kBackwardThreads)
    conv_backward_kernel(const T* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
                         const T* __restrict__ grad_y, T* __restrict__ grad_x, float* __restrict__ grad_weight,
                         float* __restrict__ grad_bias, int64_t batch, int64_t channels, int64_t length, int width,
                         bool silu) {
  __shared__ float scratch[33];
  const int64_t channel = blockIdx.x, runs = (length + kRun - 1) / kRun;
  float w[kTaps];
  aligned_taps(weight, channel, width, w);
  const float b = bias ? bias[channel] : 0.f;
  float dw[kTaps] = {}, db = 0.f;
  // The bound is the same for the whole block, so that whole warps enter the shuffles.
  for (int64_t first = 0; first < batch * runs; first += blockDim.x) {
    const int64_t unit = first + threadIdx.x;
    const bool active = unit < batch * runs;
    const int64_t offset = active ? ((unit / runs) * channels + channel) * length : 0;
    conv_backward_run<T, kTaps, kVector>(x + offset, grad_y + offset, grad_x + offset,
                                         active ? (unit % runs) * kRun : 0, length, active, w, b, silu, dw, db);
  }
#pragma unroll
  for (int jj = 0; jj < kTaps; ++jj) {
    const float total = block_reduce(dw[jj], scratch, SumOp{}, 0.f);
    const int j = jj - (kTaps - width);
    if (threadIdx.x == 0 && j >= 0) grad_weight[channel * width + j] = total;
  }
  const float total_bias = block_reduce(db, scratch, SumOp{}, 0.f);
  if (threadIdx.x == 0 && grad_bias) grad_bias[channel] = total_bias;
}

// Runs of whole vectors: every row a multiple of kRun long and every row start aligned to a run.
template <typename T>
bool vector_runs(int64_t length, std::initializer_list<const void*> pointers) {
  if (length % kRun != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % (sizeof(T) * kRun) != 0) return false;
  return true;
}

// Calls f(std::integral_constant<int, taps>, std::bool_constant<vector>) with the kernel's
// window (4, Mamba's default, or the widest) and whether runs are whole vectors.
template <typename F>
cudaError_t dispatch_layout(int64_t width, bool vector, F&& f) {
  auto with_taps = [&](auto taps) {
    return vector ? f(taps, std::true_type{}) : f(taps, std::false_type{});
  };
  if (width <= 4) return with_taps(std::integral_constant<int, 4>{});
  return with_taps(std::integral_constant<int, static_cast<int>(kMaxConvWidth)>{});
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
    if (units > kMaxForwardUnits) return cudaErrorInvalidValue;  // one unit per thread, no grid-stride loop
    return dispatch_layout(width, vector_runs<T>(length, {x, y}), [&](auto taps, auto vector) {
      conv_forward_kernel<T, decltype(taps)::value, decltype(vector)::value>
          <<<triax::kernels::grid_for(units, kForwardThreads, kMaxBlocks), kForwardThreads, 0, stream>>>(
              static_cast<const T*>(x), weight, bias, static_cast<T*>(y), batch * channels, channels, length,
              static_cast<int>(width), silu);
      return cudaGetLastError();
    });
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
    return dispatch_layout(width, vector_runs<T>(length, {x, grad_y, grad_x}), [&](auto taps, auto vector) {
      conv_backward_kernel<T, decltype(taps)::value, decltype(vector)::value>
          <<<static_cast<unsigned>(channels), kBackwardThreads, 0, stream>>>(
              static_cast<const T*>(x), weight, bias, static_cast<const T*>(grad_y), static_cast<T*>(grad_x),
              grad_weight, grad_bias, batch, channels, length, static_cast<int>(width), silu);
      return cudaGetLastError();
    });
  });
}

}  // namespace triax::mamba::kernels
