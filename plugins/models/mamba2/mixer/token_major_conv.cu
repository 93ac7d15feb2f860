// The token-major causal conv1d (token_major_conv_kernels.hpp). A thread takes one 16-byte vector
// of consecutive channels (V of them) over a run of kRun consecutive positions, walking the run
// with the last k inputs in registers, so each input is read once plus a halo of k - 1 positions
// a run; the 32 lanes of a warp take consecutive vectors, a warp reads 32 V contiguous channels
// per position. Blocks are kLanes vectors by kRows runs. The taps are aligned to the right end of
// a kTaps window (zero weights in front for shorter kernels), as in mamba/scan/causal_conv1d.cu,
// so the sums run in the same order. The backward recomputes each pre-activation from the inputs,
// writes grad_x run by run, and sums the weight and bias gradients over its block's runs in shared
// memory into one partial row per block (no atomics).
#include <cstdint>
#include <type_traits>

#include "token_major_conv_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using triax::kernels::from_float;
using triax::kernels::kVectorWidth;
using triax::kernels::load_floats;
using triax::kernels::store_floats;
using triax::kernels::to_float;

constexpr int kRun = 32;
constexpr int kLanes = 32;
constexpr int kRows = 4;
constexpr int64_t kMaxGridY = 65535, kMaxGridZ = 65535;

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

// The V channels c0 .. c0 + V - 1 of position t of batch row b (zeros past the channels). With
// kVector the vector lies in one group (group_channels a multiple of V); else element by element.
template <typename T, bool kVector>
__device__ __forceinline__ void load_input(const TokenMajorInput& x, int64_t b, int64_t t, int64_t c0, int64_t channels,
                                           float (&v)[kVectorWidth<T>]) {
  constexpr int V = kVectorWidth<T>;
  const T* row = static_cast<const T*>(x.data) + b * x.batch_stride + t * x.position_stride;
  if constexpr (kVector) {
    load_vector<T, true>(row + (c0 / x.group_channels) * x.group_stride + c0 % x.group_channels, V, v);
  } else {
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

// The thread's first channel and first position.
template <int V>
__device__ __forceinline__ int64_t first_channel() {
  return (blockIdx.x * static_cast<int64_t>(kLanes) + threadIdx.x) * V;
}
__device__ __forceinline__ int64_t first_position() {
  return (blockIdx.y * static_cast<int64_t>(kRows) + threadIdx.y) * kRun;
}

template <typename T, int kTaps, bool kVector>
__global__ void __launch_bounds__(kLanes* kRows)
    forward_kernel(TokenMajorInput x, const float* __restrict__ weight, const float* __restrict__ bias,
                   T* __restrict__ y, TokenMajorConvShape shape, bool silu) {
  constexpr int V = kVectorWidth<T>;
  const int64_t c0 = first_channel<V>(), t0 = first_position(), b = blockIdx.z;
  if (c0 >= shape.channels || t0 >= shape.length) return;
  const int64_t count = shape.channels - c0;
  float w[V][kTaps], bs[V];
  load_taps<V, kTaps>(weight, bias, c0, shape.channels, static_cast<int>(shape.width), w, bs);
  float window[kTaps][V] = {};  // x[t - (kTaps - 1) + jj]
#pragma unroll
  for (int jj = 0; jj + 1 < kTaps; ++jj) {
    const int64_t p = t0 - (kTaps - 1) + jj;
    if (p >= 0) load_input<T, kVector>(x, b, p, c0, shape.channels, window[jj]);
  }
  T* out = y + (b * shape.length) * shape.channels + c0;
  const int64_t end = t0 + kRun < shape.length ? t0 + kRun : shape.length;
  for (int64_t t = t0; t < end; ++t) {
    load_input<T, kVector>(x, b, t, c0, shape.channels, window[kTaps - 1]);
    float v[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float acc = pre_activation(w, bs, window, i);
      v[i] = silu ? acc * sigmoid(acc) : acc;
    }
    store_vector<T, kVector>(out + t * shape.channels, count, v);
    shift(window);
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

// grad_x[t] = sum_jj w[jj] g[t + (kTaps - 1) - jj], g the pre-activation gradients; a run reads
// the inputs from kTaps - 1 positions before it to kTaps - 1 after (the g its last outputs need).
template <typename T, int kTaps, bool kVector>
__global__ void __launch_bounds__(kLanes* kRows)
    backward_kernel(TokenMajorInput x, const float* __restrict__ weight, const float* __restrict__ bias,
                    const T* __restrict__ grad_y, TokenMajorGradient grad_x, float* __restrict__ partials,
                    TokenMajorConvShape shape, bool silu) {
  constexpr int V = kVectorWidth<T>;
  __shared__ float scratch[kRows][kLanes * V];
  const int64_t c0 = first_channel<V>(), t0 = first_position(), b = blockIdx.z;
  const bool active = c0 < shape.channels && t0 < shape.length;  // all threads join the sums
  const int width = static_cast<int>(shape.width);
  float dw[kTaps][V] = {}, db[V] = {};
  if (active) {
    const int64_t count = shape.channels - c0;
    float w[V][kTaps], bs[V];
    load_taps<V, kTaps>(weight, bias, c0, shape.channels, width, w, bs);
    float inputs[kTaps][V] = {};  // x[u - (kTaps - 1) + jj]
    float grads[kTaps][V] = {};   // g[u - (kTaps - 1) + jj]
#pragma unroll
    for (int jj = 0; jj + 1 < kTaps; ++jj) {
      const int64_t p = t0 - (kTaps - 1) + jj;
      if (p >= 0) load_input<T, kVector>(x, b, p, c0, shape.channels, inputs[jj]);
    }
    const T* dy = grad_y + (b * shape.length) * shape.channels + c0;
    const int64_t run_end = t0 + kRun < shape.length ? t0 + kRun : shape.length;
    const int64_t last = run_end + kTaps - 1;  // one past the last u whose g a grad_x of the run reads
    for (int64_t u = t0; u < last; ++u) {
      shift(grads);
      if (u < shape.length) {
        load_input<T, kVector>(x, b, u, c0, shape.channels, inputs[kTaps - 1]);
        float g[V];
        load_vector<T, kVector>(dy + u * shape.channels, count, g);
#pragma unroll
        for (int i = 0; i < V; ++i)
          grads[kTaps - 1][i] = silu ? g[i] * silu_slope(pre_activation(w, bs, inputs, i)) : g[i];
        if (u < run_end) {
#pragma unroll
          for (int i = 0; i < V; ++i) {
            db[i] += grads[kTaps - 1][i];
#pragma unroll
            for (int jj = 0; jj < kTaps; ++jj) dw[jj][i] += grads[kTaps - 1][i] * inputs[jj][i];
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) grads[kTaps - 1][i] = 0.f;
      }
      const int64_t t = u - (kTaps - 1);
      if (t >= t0) {
        float v[V];
#pragma unroll
        for (int i = 0; i < V; ++i) {
          float acc = 0.f;
#pragma unroll
          for (int jj = 0; jj < kTaps; ++jj) acc += w[i][jj] * grads[kTaps - 1 - jj][i];
          v[i] = acc;
        }
        store_gradient<T, kVector>(grad_x, b, t, c0, shape.channels, v);
      }
      shift(inputs);
    }
  }
  const int64_t row = blockIdx.z * static_cast<int64_t>(gridDim.y) + blockIdx.y;
  const int64_t columns = width + 1;
#pragma unroll
  for (int jj = 0; jj < kTaps; ++jj) {
    const int j = jj - (kTaps - width);
    if (j >= 0) sum_rows<V>(scratch, dw[jj], partials, row, c0, shape.channels, columns, j);
  }
  sum_rows<V>(scratch, db, partials, row, c0, shape.channels, columns, width);
}

// Whether a layout of x (or grad_x) is on whole 16-byte vectors, each within a group.
template <typename T, typename Layout>
bool vector_strides(const Layout& x) {
  constexpr int64_t V = kVectorWidth<T>;
  return x.group_channels % V == 0 && x.batch_stride % V == 0 && x.position_stride % V == 0 &&
         x.group_stride % V == 0 && triax::kernels::aligned16(x.data);
}

template <typename T>
bool vector_layout(const TokenMajorInput& x, int64_t channels, std::initializer_list<const void*> outputs) {
  if (channels % kVectorWidth<T> != 0 || !vector_strides<T>(x)) return false;
  for (const void* p : outputs)
    if (!triax::kernels::aligned16(p)) return false;
  return true;
}

template <typename T>
dim3 grid_of(const TokenMajorConvShape& shape) {
  const int64_t vectors = (shape.channels + kVectorWidth<T> - 1) / kVectorWidth<T>;
  const int64_t runs = (shape.length + kRun - 1) / kRun;
  return dim3(static_cast<unsigned>((vectors + kLanes - 1) / kLanes), static_cast<unsigned>((runs + kRows - 1) / kRows),
              static_cast<unsigned>(shape.batch));
}

bool launchable(const TokenMajorConvShape& shape) {
  const int64_t runs = (shape.length + kRun - 1) / kRun;
  return shape.width >= 1 && shape.width <= kMaxTokenMajorConvWidth && (runs + kRows - 1) / kRows <= kMaxGridY &&
         shape.batch <= kMaxGridZ;
}

// Calls f(taps, vector) with the window (4, Mamba's default, or the widest) and whether whole
// vectors are loaded and stored.
template <typename F>
cudaError_t dispatch_layout(int64_t width, bool vector, F&& f) {
  auto with_taps = [&](auto taps) { return vector ? f(taps, std::true_type{}) : f(taps, std::false_type{}); };
  if (width <= 4) return with_taps(std::integral_constant<int, 4>{});
  return with_taps(std::integral_constant<int, static_cast<int>(kMaxTokenMajorConvWidth)>{});
}

}  // namespace

int64_t token_major_conv_partial_rows(const TokenMajorConvShape& shape) {
  const int64_t runs = (shape.length + kRun - 1) / kRun;
  return shape.batch * ((runs + kRows - 1) / kRows);
}

cudaError_t token_major_conv_forward(triax::kernels::Dtype dtype, const TokenMajorInput& x, const float* weight,
                                     const float* bias, void* y, const TokenMajorConvShape& shape, bool silu,
                                     cudaStream_t stream) {
  if (shape.batch == 0 || shape.length == 0 || shape.channels == 0) return cudaSuccess;
  if (!launchable(shape)) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_layout(shape.width, vector_layout<T>(x, shape.channels, {y}), [&](auto taps, auto vector) {
      forward_kernel<T, decltype(taps)::value, decltype(vector)::value>
          <<<grid_of<T>(shape), dim3(kLanes, kRows), 0, stream>>>(x, weight, bias, static_cast<T*>(y), shape, silu);
      return cudaGetLastError();
    });
  });
}

cudaError_t token_major_conv_backward(triax::kernels::Dtype dtype, const TokenMajorInput& x, const float* weight,
                                      const float* bias, const void* grad_y, const TokenMajorGradient& grad_x,
                                      float* partials, const TokenMajorConvShape& shape, bool silu,
                                      cudaStream_t stream) {
  if (shape.batch == 0 || shape.length == 0 || shape.channels == 0) return cudaSuccess;
  if (!launchable(shape)) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool vector = vector_layout<T>(x, shape.channels, {grad_y}) && vector_strides<T>(grad_x);
    return dispatch_layout(shape.width, vector, [&](auto taps, auto vector_tag) {
      backward_kernel<T, decltype(taps)::value, decltype(vector_tag)::value>
          <<<grid_of<T>(shape), dim3(kLanes, kRows), 0, stream>>>(x, weight, bias, static_cast<const T*>(grad_y),
                                                                  grad_x, partials, shape, silu);
      return cudaGetLastError();
    });
  });
}

}  // namespace triax::mamba2::kernels
