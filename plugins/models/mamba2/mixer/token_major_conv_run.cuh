// A thread's run of positions in the token-major conv1d's kernels (token_major_conv.cu): the
// block and run shape, its 16-byte loads and stores at any layout, the taps, the sliding window,
// the forward's output and the backward's per-position steps and block sums. Included by
// token_major_conv.cu only.
#pragma once

#include <cstdint>

#include "token_major_conv_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels::conv_run {

using triax::kernels::from_float;
using triax::kernels::kVectorWidth;
using triax::kernels::load_floats;
using triax::kernels::store_floats;
using triax::kernels::to_float;

constexpr int kRun = 32;
constexpr int kLanes = 32;
constexpr int kRows = 4;
constexpr int64_t kMaxGridY = 65535, kMaxGridZ = 65535;
// Positions a staged thread has in flight, and its slots (one more: the slot refilled is the one
// read a step before, not the one just read).
constexpr int kDepth = 8;
constexpr int kSlots = kDepth + 1;

template <typename T, bool kVector>
__device__ __forceinline__ void load_vector(const T* p, int64_t count, float (&v)[kVectorWidth<T>]) {
  constexpr int V = kVectorWidth<T>;
  if constexpr (kVector) {
    load_floats<T, V>(p, v);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = i < count ? to_float(p[i]) : 0.f;
  }
}

template <typename T, bool kVector>
__device__ __forceinline__ void store_vector(T* p, int64_t count, const float (&v)[kVectorWidth<T>]) {
  constexpr int V = kVectorWidth<T>;
  if constexpr (kVector) {
    store_floats<T, V>(p, v);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (i < count) p[i] = from_float<T>(v[i]);
  }
}

// Where channel c0 of position t of batch row b lies (c0 and the next V - 1 in one group).
template <typename T>
__device__ __forceinline__ const T* input_address(const TokenMajorInput& x, int64_t b, int64_t t, int64_t c0) {
  return static_cast<const T*>(x.data) + b * x.batch_stride + t * x.position_stride +
         (c0 / x.group_channels) * x.group_stride + c0 % x.group_channels;
}

// The V channels c0 .. c0 + V - 1 of position t of batch row b (zeros past the channels). With
// kVector the vector lies in one group (group_channels a multiple of V); else element by element.

template <typename T, bool kVector>
__device__ __forceinline__ void load_input(const TokenMajorInput& x, int64_t b, int64_t t, int64_t c0, int64_t channels,
                                           float (&v)[kVectorWidth<T>]) {
  constexpr int V = kVectorWidth<T>;
  if constexpr (kVector) {
    load_vector<T, true>(input_address<T>(x, b, t, c0), V, v);
  } else {
    const T* row = static_cast<const T*>(x.data) + b * x.batch_stride + t * x.position_stride;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int64_t c = c0 + i;
      v[i] = c < channels ? to_float(row[(c / x.group_channels) * x.group_stride + c % x.group_channels]) : 0.f;
    }
  }
}

// Stores the V channels c0 .. c0 + V - 1 of position t of batch row b of grad_x, as load_input reads x.
template <typename T, bool kVector>
__device__ __forceinline__ void store_gradient(const TokenMajorGradient& out, int64_t b, int64_t t, int64_t c0,
                                               int64_t channels, const float (&v)[kVectorWidth<T>]) {
  constexpr int V = kVectorWidth<T>;
  T* row = static_cast<T*>(out.data) + b * out.batch_stride + t * out.position_stride;
  if constexpr (kVector) {
    store_vector<T, true>(row + (c0 / out.group_channels) * out.group_stride + c0 % out.group_channels, V, v);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int64_t c = c0 + i;
      if (c < channels) row[(c / out.group_channels) * out.group_stride + c % out.group_channels] = from_float<T>(v[i]);
    }
  }
}

// w[i][jj] multiplies x[t - (kTaps - 1) + jj] of channel c0 + i in y[t]; zero past the channels.
template <int V, int kTaps>
__device__ __forceinline__ void load_taps(const float* weight, const float* bias, int64_t c0, int64_t channels,
                                          int width, float (&w)[V][kTaps], float (&b)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t c = c0 + i;
    b[i] = bias && c < channels ? bias[c] : 0.f;
#pragma unroll
    for (int jj = 0; jj < kTaps; ++jj) {
      const int j = jj - (kTaps - width);
      w[i][jj] = j >= 0 && c < channels ? weight[c * width + j] : 0.f;
    }
  }
}

template <int V, int kTaps>
__device__ __forceinline__ float pre_activation(const float (&w)[V][kTaps], const float (&b)[V],
                                                const float (&window)[kTaps][V], int i) {
  float acc = b[i];
#pragma unroll
  for (int jj = 0; jj < kTaps; ++jj) acc += w[i][jj] * window[jj][i];
  return acc;
}

__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + __expf(-v)); }

__device__ __forceinline__ float silu_slope(float pre) {
  const float s = sigmoid(pre);
  return s * (1.f + pre * (1.f - s));
}

// window[jj] <- window[jj + 1]: the oldest position leaves, the last slot is free.
template <int V, int kTaps>
__device__ __forceinline__ void shift(float (&window)[kTaps][V]) {
#pragma unroll
  for (int jj = 0; jj + 1 < kTaps; ++jj)
#pragma unroll
    for (int i = 0; i < V; ++i) window[jj][i] = window[jj + 1][i];
}

template <int V>
__device__ __forceinline__ void copy_values(const float (&from)[V], float (&to)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) to[i] = from[i];
}

// The thread's first channel and first position.
template <int V>
__device__ __forceinline__ int64_t first_channel() {
  return (blockIdx.x * static_cast<int64_t>(kLanes) + threadIdx.x) * V;
}
__device__ __forceinline__ int64_t first_position() {
  return (blockIdx.y * static_cast<int64_t>(kRows) + threadIdx.y) * kRun;
}

// y[t] from the window x[t - (kTaps - 1)] .. x[t], SiLU'd if asked.
template <int V, int kTaps>
__device__ __forceinline__ void convolved(const float (&w)[V][kTaps], const float (&b)[V],
                                          const float (&window)[kTaps][V], bool silu, float (&v)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const float acc = pre_activation(w, b, window, i);
    v[i] = silu ? acc * sigmoid(acc) : acc;
  }
}

// Sums `value` of every thread over the block's rows (threadIdx.y) into partial row `row`
// (column `column` of each channel's width + 1).
template <int V>
__device__ __forceinline__ void sum_rows(float (*scratch)[kLanes * V], const float (&value)[V], float* partials,
                                         int64_t row, int64_t c0, int64_t channels, int64_t columns, int column) {
#pragma unroll
  for (int i = 0; i < V; ++i) scratch[threadIdx.y][threadIdx.x * V + i] = value[i];
  __syncthreads();
  if (threadIdx.y == 0) {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float sum = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) sum += scratch[r][threadIdx.x * V + i];
      if (c0 + i < channels) partials[(row * channels + c0 + i) * columns + column] = sum;
    }
  }
  __syncthreads();
}

// A backward thread's run: its taps, the last kTaps inputs and pre-activation gradients, and its
// sums of the taps' and the bias's gradients (zero for a thread past the shape: all join the sums).
template <int V, int kTaps>
struct BackwardRun {
  float w[V][kTaps], bs[V];
  float inputs[kTaps][V] = {};  // x[u - (kTaps - 1) + jj]
  float grads[kTaps][V] = {};   // g[u - (kTaps - 1) + jj]
  float dw[kTaps][V] = {}, db[V] = {};
};

// g[u] from dy[u] (x[u] in inputs' last slot), into grads' last slot; inside the run it joins
// the taps' and the bias's sums.
template <int V, int kTaps>
__device__ __forceinline__ void take_gradient(BackwardRun<V, kTaps>& r, const float (&dy)[V], bool in_run, bool silu) {
#pragma unroll
  for (int i = 0; i < V; ++i)
    r.grads[kTaps - 1][i] = silu ? dy[i] * silu_slope(pre_activation(r.w, r.bs, r.inputs, i)) : dy[i];
  if (!in_run) return;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    r.db[i] += r.grads[kTaps - 1][i];
#pragma unroll
    for (int jj = 0; jj < kTaps; ++jj) r.dw[jj][i] += r.grads[kTaps - 1][i] * r.inputs[jj][i];
  }
}

// grad_x[t] = sum_jj w[jj] g[t + (kTaps - 1) - jj], the window's g ending at t + kTaps - 1.
template <int V, int kTaps>
__device__ __forceinline__ void input_gradient(const BackwardRun<V, kTaps>& r, float (&v)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    float acc = 0.f;
#pragma unroll
    for (int jj = 0; jj < kTaps; ++jj) acc += r.w[i][jj] * r.grads[kTaps - 1 - jj][i];
    v[i] = acc;
  }
}

// The block's sums of its runs' tap and bias gradients into its partial row.
template <int V, int kTaps>
__device__ __forceinline__ void store_partials(float (*scratch)[kLanes * V], const BackwardRun<V, kTaps>& r,
                                               float* partials, int64_t c0, const TokenMajorConvShape& shape) {
  const int width = static_cast<int>(shape.width);
  const int64_t row = blockIdx.z * static_cast<int64_t>(gridDim.y) + blockIdx.y;
  const int64_t columns = width + 1;
#pragma unroll
  for (int jj = 0; jj < kTaps; ++jj) {
    const int j = jj - (kTaps - width);
    if (j >= 0) sum_rows<V>(scratch, r.dw[jj], partials, row, c0, shape.channels, columns, j);
  }
  sum_rows<V>(scratch, r.db, partials, row, c0, shape.channels, columns, width);
}

}  // namespace triax::mamba2::kernels::conv_run
