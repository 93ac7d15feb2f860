// The token-major causal conv1d (token_major_conv_kernels.hpp). A thread takes one 16-byte vector
// of consecutive channels (V of them) over a run of kRun consecutive positions, walking the run
// with the last k inputs in registers, so each input is read once plus a halo of k - 1 positions
// a run; the 32 lanes of a warp take consecutive vectors, a warp reads 32 V contiguous channels
// per position. Blocks are kLanes vectors by kRows runs. The taps are aligned to the right end of
// a kTaps window (zero weights in front for shorter kernels), as in mamba/scan/causal_conv1d.cu,
// so the sums run in the same order. The backward recomputes each pre-activation from the inputs,
// writes grad_x run by run, and sums the weight and bias gradients over its block's runs in shared
// memory into one partial row per block (no atomics).
//
// The staged kernels (16-byte vectors only) do the same arithmetic in the same order, so their
// bits are those of the direct ones; they differ in how the inputs arrive. A direct thread loads
// position t's vectors and waits for them before it can store t's result (a store to grad_x or y
// may alias the next loads, so the compiler cannot hoist them): one position's loads in flight a
// thread, about a third of the copy bandwidth. A staged thread keeps kDepth positions ahead in
// flight as cp.async copies into its own slots of shared memory, which hold no register.
#include <cstdint>
#include <type_traits>

#include "token_major_conv_kernels.hpp"
#include "token_major_conv_run.cuh"
#include "triax/kernels/async_copy.cuh"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace conv_run;  // NOLINT: the run's pieces, this file's only subject
using triax::kernels::commit_async_copies;
using triax::kernels::copy16_async;
using triax::kernels::wait_async_copies_but;

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
    convolved(w, bs, window, silu, v);
    store_vector<T, kVector>(out + t * shape.channels, count, v);
    shift(window);
  }
}

// The forward over 16-byte vectors with kDepth positions in flight: step s of the run brings
// x[t0 - (kTaps - 1) + s] (none before the start), the window fills over the first kTaps - 1 steps.
template <typename T, int kTaps>
__global__ void __launch_bounds__(kLanes* kRows)
    forward_staged_kernel(TokenMajorInput x, const float* __restrict__ weight, const float* __restrict__ bias,
                          T* __restrict__ y, TokenMajorConvShape shape, bool silu) {
  constexpr int V = kVectorWidth<T>;
  __shared__ uint4 slots[kSlots][kLanes * kRows];
  const int thread = threadIdx.y * kLanes + threadIdx.x;
  const int64_t c0 = first_channel<V>(), t0 = first_position(), b = blockIdx.z;
  if (c0 >= shape.channels || t0 >= shape.length) return;
  float w[V][kTaps], bs[V];
  load_taps<V, kTaps>(weight, bias, c0, shape.channels, static_cast<int>(shape.width), w, bs);
  const int64_t first = t0 - (kTaps - 1);
  const int steps = static_cast<int>((t0 + kRun < shape.length ? t0 + kRun : shape.length) - first);
  auto request = [&](int s) {
    const int64_t p = first + s;
    if (s < steps && p >= 0) copy16_async(&slots[s % kSlots][thread], input_address<T>(x, b, p, c0));
    commit_async_copies();
  };
#pragma unroll
  for (int s = 0; s < kDepth; ++s) request(s);
  float window[kTaps][V] = {};  // x[p - (kTaps - 1) + jj]; zeros before the start
  T* out = y + (b * shape.length) * shape.channels + c0;
  for (int s = 0; s < steps; ++s) {
    wait_async_copies_but<kDepth - 1>();
    const int64_t p = first + s;
    if (p >= 0) load_floats<T, V>(reinterpret_cast<const T*>(&slots[s % kSlots][thread]), window[kTaps - 1]);
    request(s + kDepth);
    if (p >= t0) {
      float v[V];
      convolved(w, bs, window, silu, v);
      store_floats<T, V>(out + p * shape.channels, v);
    }
    shift(window);
  }
}

// A run reads the inputs from kTaps - 1 positions before it to kTaps - 1 after (the g its last
// outputs need).
template <typename T, int kTaps, bool kVector>
__global__ void __launch_bounds__(kLanes* kRows)
    backward_kernel(TokenMajorInput x, const float* __restrict__ weight, const float* __restrict__ bias,
                    const T* __restrict__ grad_y, TokenMajorGradient grad_x, float* __restrict__ partials,
                    TokenMajorConvShape shape, bool silu) {
  constexpr int V = kVectorWidth<T>;
  __shared__ float scratch[kRows][kLanes * V];
  const int64_t c0 = first_channel<V>(), t0 = first_position(), b = blockIdx.z;
  BackwardRun<V, kTaps> r;
  if (c0 < shape.channels && t0 < shape.length) {
    const int64_t count = shape.channels - c0;
    load_taps<V, kTaps>(weight, bias, c0, shape.channels, static_cast<int>(shape.width), r.w, r.bs);
#pragma unroll
    for (int jj = 0; jj + 1 < kTaps; ++jj) {
      const int64_t p = t0 - (kTaps - 1) + jj;
      if (p >= 0) load_input<T, kVector>(x, b, p, c0, shape.channels, r.inputs[jj]);
    }
    const T* dy = grad_y + (b * shape.length) * shape.channels + c0;
    const int64_t run_end = t0 + kRun < shape.length ? t0 + kRun : shape.length;
    const int64_t last = run_end + kTaps - 1;  // one past the last u whose g a grad_x of the run reads
    for (int64_t u = t0; u < last; ++u) {
      shift(r.grads);
      if (u < shape.length) {
        load_input<T, kVector>(x, b, u, c0, shape.channels, r.inputs[kTaps - 1]);
        float g[V];
        load_vector<T, kVector>(dy + u * shape.channels, count, g);
        take_gradient(r, g, u < run_end, silu);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) r.grads[kTaps - 1][i] = 0.f;
      }
      const int64_t t = u - (kTaps - 1);
      if (t >= t0) {
        float v[V];
        input_gradient(r, v);
        store_gradient<T, kVector>(grad_x, b, t, c0, shape.channels, v);
      }
      shift(r.inputs);
    }
  }
  store_partials(scratch, r, partials, c0, shape);
}

// The backward over 16-byte vectors with kDepth positions in flight: step s of the run brings
// x[p] and dy[p] of p = t0 - (kTaps - 1) + s (x from the start, dy from t0, neither past the end).
template <typename T, int kTaps>
__global__ void __launch_bounds__(kLanes* kRows)
    backward_staged_kernel(TokenMajorInput x, const float* __restrict__ weight, const float* __restrict__ bias,
                           const T* __restrict__ grad_y, TokenMajorGradient grad_x, float* __restrict__ partials,
                           TokenMajorConvShape shape, bool silu) {
  constexpr int V = kVectorWidth<T>;
  __shared__ float scratch[kRows][kLanes * V];
  __shared__ uint4 slots[kSlots][2][kLanes * kRows];  // [step][x, dy][thread]
  const int thread = threadIdx.y * kLanes + threadIdx.x;
  const int64_t c0 = first_channel<V>(), t0 = first_position(), b = blockIdx.z;
  BackwardRun<V, kTaps> r;
  if (c0 < shape.channels && t0 < shape.length) {
    load_taps<V, kTaps>(weight, bias, c0, shape.channels, static_cast<int>(shape.width), r.w, r.bs);
    const T* dy = grad_y + (b * shape.length) * shape.channels + c0;
    const int64_t run_end = t0 + kRun < shape.length ? t0 + kRun : shape.length;
    const int64_t first = t0 - (kTaps - 1);
    const int steps = static_cast<int>(run_end + kTaps - 1 - first);
    auto request = [&](int s) {
      const int64_t p = first + s;
      if (s < steps && p >= 0 && p < shape.length) {
        copy16_async(&slots[s % kSlots][0][thread], input_address<T>(x, b, p, c0));
        if (p >= t0) copy16_async(&slots[s % kSlots][1][thread], dy + p * shape.channels);
      }
      commit_async_copies();
    };
#pragma unroll
    for (int s = 0; s < kDepth; ++s) request(s);
    for (int s = 0; s < steps; ++s) {
      wait_async_copies_but<kDepth - 1>();
      const int64_t p = first + s;
      const bool arrived = p >= 0 && p < shape.length;
      float xv[V], g[V];
      if (arrived) load_floats<T, V>(reinterpret_cast<const T*>(&slots[s % kSlots][0][thread]), xv);
      if (arrived && p >= t0) load_floats<T, V>(reinterpret_cast<const T*>(&slots[s % kSlots][1][thread]), g);
      request(s + kDepth);
      if (p < t0) {  // filling the input window
        if (arrived) copy_values(xv, r.inputs[kTaps - 1]);
        shift(r.inputs);
        continue;
      }
      shift(r.grads);
      if (arrived) {
        copy_values(xv, r.inputs[kTaps - 1]);
        take_gradient(r, g, p < run_end, silu);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) r.grads[kTaps - 1][i] = 0.f;
      }
      const int64_t t = p - (kTaps - 1);
      if (t >= t0) {
        float v[V];
        input_gradient(r, v);
        store_gradient<T, true>(grad_x, b, t, c0, shape.channels, v);
      }
      shift(r.inputs);
    }
  }
  store_partials(scratch, r, partials, c0, shape);
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
                                     TokenMajorConvLoads loads, cudaStream_t stream) {
  if (shape.batch == 0 || shape.length == 0 || shape.channels == 0) return cudaSuccess;
  if (!launchable(shape)) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_layout(shape.width, vector_layout<T>(x, shape.channels, {y}), [&](auto taps, auto vector) {
      constexpr int kTaps = decltype(taps)::value;
      const dim3 grid = grid_of<T>(shape), block(kLanes, kRows);
      if (decltype(vector)::value && loads == TokenMajorConvLoads::kStaged)
        forward_staged_kernel<T, kTaps><<<grid, block, 0, stream>>>(x, weight, bias, static_cast<T*>(y), shape, silu);
      else
        forward_kernel<T, kTaps, decltype(vector)::value>
            <<<grid, block, 0, stream>>>(x, weight, bias, static_cast<T*>(y), shape, silu);
      return cudaGetLastError();
    });
  });
}

cudaError_t token_major_conv_backward(triax::kernels::Dtype dtype, const TokenMajorInput& x, const float* weight,
                                      const float* bias, const void* grad_y, const TokenMajorGradient& grad_x,
                                      float* partials, const TokenMajorConvShape& shape, bool silu,
                                      TokenMajorConvLoads loads, cudaStream_t stream) {
  if (shape.batch == 0 || shape.length == 0 || shape.channels == 0) return cudaSuccess;
  if (!launchable(shape)) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool vector = vector_layout<T>(x, shape.channels, {grad_y}) && vector_strides<T>(grad_x);
    return dispatch_layout(shape.width, vector, [&](auto taps, auto vector_tag) {
      constexpr int kTaps = decltype(taps)::value;
      const dim3 grid = grid_of<T>(shape), block(kLanes, kRows);
      const T* dy = static_cast<const T*>(grad_y);
      if (decltype(vector_tag)::value && loads == TokenMajorConvLoads::kStaged)
        backward_staged_kernel<T, kTaps>
            <<<grid, block, 0, stream>>>(x, weight, bias, dy, grad_x, partials, shape, silu);
      else
        backward_kernel<T, kTaps, decltype(vector_tag)::value>
            <<<grid, block, 0, stream>>>(x, weight, bias, dy, grad_x, partials, shape, silu);
      return cudaGetLastError();
    });
  });
}

}  // namespace triax::mamba2::kernels
