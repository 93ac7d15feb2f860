// The gated norm's second-generation kernels (gated_norm_kernels.hpp; the default where a row fits,
// TRIAX_MAMBA2_GATED_NORM_KERNEL=v1 keeps the first).
// A block of up to 256 threads covers one group's channels; each thread owns up to kMaxSlots
// 16-byte vectors of them (slot k: vector k * blockDim.x + threadIdx.x) and keeps those values
// in registers between the row's reduction and its output, so every input is read from global
// memory once. Blocks walk rows (grid x: a few blocks per SM; grid y: the groups), so a thread owns
// the same channels in every row it visits: the backward sums the weight's and D's terms in
// registers, in a fixed order, and writes one row of partials per block. Where a pointer or stride
// does not allow 16-byte vectors, the same kernels load each element alone.
#include <type_traits>

#include "gated_norm_launch.cuh"
#include "gated_norm_slots.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace triax::kernels;  // the SDK's device helpers (kernel_utils.cuh)

// Threads per block at most; with __launch_bounds__ every plan launches, whatever its registers.
constexpr int kThreads = 256;
// Vectors of channels a thread holds per row at most: 1, 2 or 4.
constexpr int kMaxSlots = 4;

// One slot's operands in a row: x and z as stored, and the skip s = y + D x in fp32.
template <int N, typename T>
struct RowTerms {
  Pack<T, N> x, z;
  float s[N];
};

template <bool Vectorized, int K, int N, typename T, typename Y>
__device__ __forceinline__ RowTerms<N, T> load_terms(const Operands<T, Y>& o, int64_t row, int64_t group,
                                                     const Slots<K, N, Vectorized>& slot, int k) {
  const int first = slot.first[k], count = slot.count[k];
  RowTerms<N, T> t;
  t.x = load_channels<Vectorized, N>(o.x + row * o.xs.row_stride + group * o.xs.group_stride + first, count);
  t.z = load_channels<Vectorized, N>(o.z + row * o.zs.row_stride + group * o.zs.group_stride + first, count);
  const Pack<Y, N> y =
      load_channels<Vectorized, N>(o.y + row * o.ys.row_stride + group * o.ys.group_stride + first, count);
#pragma unroll
  for (int i = 0; i < N; ++i) t.s[i] = to_float(y.v[i]) + slot.skip_of(k, i) * to_float(t.x.v[i]);
  return t;
}

// Channel i of slot k in a row of the backward.
template <int N, typename T, int K, bool Vectorized>
__device__ __forceinline__ ElementBackward element(const RowTerms<N, T>& t, const Pack<T, N>& g,
                                                   const Slots<K, N, Vectorized>& slot, int k, int i, float r) {
  const float z = to_float(t.z.v[i]);
  return {t.s[i], z, gate_sigmoid(z), to_float(g.v[i]), slot.weight[k][i], r};
}

template <typename T, typename Y, int K, bool Vectorized>
__global__ void __launch_bounds__(kThreads)
    gated_norm_forward_v2_kernel(Operands<T, Y> o, int64_t rows, T* __restrict__ out, float* __restrict__ rstd) {
  constexpr int N = kVectorWidth<T>;
  __shared__ float scratch[33];
  const int64_t group = blockIdx.y, width = o.groups * o.channels;
  const auto slot = slots_of<K, N, Vectorized>(o, group);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float gated[K][N];
    float squares = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (slot.count[k] == 0) continue;
      const RowTerms<N, T> t = load_terms(o, row, group, slot, k);
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const float z = to_float(t.z.v[i]);
        gated[k][i] = t.s[i] * z * gate_sigmoid(z);
        squares += gated[k][i] * gated[k][i];
      }
    }
    const float r = rsqrtf(block_reduce(squares, scratch, SumOp{}, 0.f) / static_cast<float>(o.channels) + o.eps);
    if (threadIdx.x == 0) rstd[row * o.groups + group] = r;
    T* out_row = out + row * width + group * o.channels;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (slot.count[k] == 0) continue;
      float normed[N];
#pragma unroll
      for (int i = 0; i < N; ++i) normed[i] = gated[k][i] * r * slot.weight[k][i];
      store_channels<Vectorized>(out_row + slot.first[k], slot.count[k], normed);
    }
  }
}

template <typename T, typename Y, int K, bool Vectorized>
__global__ void __launch_bounds__(kThreads)
    gated_norm_backward_v2_kernel(Operands<T, Y> o, int64_t rows, const T* __restrict__ grad_out,
                                  const float* __restrict__ rstd, Y* __restrict__ grad_y, T* __restrict__ grad_x,
                                  T* __restrict__ grad_z, float* __restrict__ weight_partials,
                                  float* __restrict__ skip_partials) {
  constexpr int N = kVectorWidth<T>;
  __shared__ float scratch[33];
  const int64_t group = blockIdx.y, width = o.groups * o.channels;
  const auto slot = slots_of<K, N, Vectorized>(o, group);
  float weight_sum[K][N] = {}, skip_sum[K][N] = {};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float r = rstd[row * o.groups + group];
    const int64_t base = row * width + group * o.channels;
    RowTerms<N, T> t[K];
    Pack<T, N> g[K];
    float dot = 0.f;  // sum over the group of d(normed) * normed
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (slot.count[k] == 0) continue;
      t[k] = load_terms(o, row, group, slot, k);
      g[k] = load_channels<Vectorized, N>(grad_out + base + slot.first[k], slot.count[k]);
#pragma unroll
      for (int i = 0; i < N; ++i) dot += element(t[k], g[k], slot, k, i, r).dot_term();
    }
    const float mean_dot = block_reduce(dot, scratch, SumOp{}, 0.f) / static_cast<float>(o.channels);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (slot.count[k] == 0) continue;
      float dy[N], dx[N], dz[N];
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const ElementGradients d = element_gradients(element(t[k], g[k], slot, k, i, r), mean_dot);
        dy[i] = d.ds;
        dx[i] = d.ds * slot.skip_of(k, i);
        dz[i] = d.dz;
        weight_sum[k][i] += d.weight_term;
        skip_sum[k][i] += d.ds * to_float(t[k].x.v[i]);
      }
      store_channels<Vectorized>(grad_y + base + slot.first[k], slot.count[k], dy);
      store_channels<Vectorized>(grad_x + base + slot.first[k], slot.count[k], dx);
      store_channels<Vectorized>(grad_z + base + slot.first[k], slot.count[k], dz);
    }
  }
  const int64_t partial = blockIdx.x * width + group * o.channels;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (slot.count[k] == 0) continue;
    store_channels<Vectorized>(weight_partials + partial + slot.first[k], slot.count[k], weight_sum[k]);
    store_channels<Vectorized>(skip_partials + partial + slot.first[k], slot.count[k], skip_sum[k]);
  }
}

// ---- launch plan (host) -----------------------------------------------------------------------

// Slots per thread: the fewest of 1, 2, 4 that cover a group's vectors with kThreads threads; 0
// where none does.
int slots_for(const GatedNormInputs& in, const GatedNormShape& shape) {
  const int64_t vectors = (shape.channels + vector_width(in.dtype) - 1) / vector_width(in.dtype);
  for (int slots = 1; slots <= kMaxSlots; slots *= 2)
    if (vectors <= int64_t{slots} * kThreads) return slots;
  return 0;
}

int threads_for(const GatedNormInputs& in, const GatedNormShape& shape) {
  const int64_t vectors = (shape.channels + vector_width(in.dtype) - 1) / vector_width(in.dtype);
  const int slots = slots_for(in, shape);
  return row_threads((vectors + slots - 1) / slots, kThreads);
}

// Calls f(TypeTag<T>{}, TypeTag<Y>{}, std::integral_constant<int, K>{}) for the operands' types
// and their plan's slots.
template <typename F>
cudaError_t dispatch_plan(const GatedNormInputs& in, const GatedNormShape& shape, F&& f) {
  return dispatch_gated_norm_types(in, [&](auto t_tag, auto y_tag) {
    switch (slots_for(in, shape)) {
      case 1:
        return f(t_tag, y_tag, std::integral_constant<int, 1>{});
      case 2:
        return f(t_tag, y_tag, std::integral_constant<int, 2>{});
      case 4:
        return f(t_tag, y_tag, std::integral_constant<int, 4>{});
    }
    return cudaErrorInvalidValue;
  });
}

}  // namespace

bool gated_norm_v2_fits(const GatedNormInputs& in, const GatedNormShape& shape) { return slots_for(in, shape) > 0; }

int64_t gated_norm_v2_partial_rows(const GatedNormInputs& in, const GatedNormShape& shape) {
  int64_t blocks = 0;  // none without rows: the caller's sums over the partials are then zeros
  if (shape.rows == 0 || !gated_norm_v2_fits(in, shape)) return blocks;
  dispatch_plan(in, shape, [&](auto t_tag, auto y_tag, auto slots) {
    using T = typename decltype(t_tag)::type;
    using Y = typename decltype(y_tag)::type;
    // The vectorised instance sizes the grid for both: the partials' rows must not depend on alignment.
    blocks = blocks_per_group(gated_norm_backward_v2_kernel<T, Y, decltype(slots)::value, true>, threads_for(in, shape),
                              shape);
    return cudaSuccess;
  });
  return blocks;
}

cudaError_t gated_norm_forward_v2(const GatedNormInputs& in, const GatedNormShape& shape, void* out, float* rstd,
                                  cudaStream_t stream) {
  if (shape.rows == 0 || shape.channels == 0) return cudaSuccess;
  if (!gated_norm_v2_fits(in, shape)) return cudaErrorInvalidValue;
  return dispatch_plan(in, shape, [&](auto t_tag, auto y_tag, auto slots) {
    using T = typename decltype(t_tag)::type;
    using Y = typename decltype(y_tag)::type;
    return dispatch_vectorized(vectorized<T, Y>(in, shape, {out}), [&](auto vector) {
      const auto kernel = gated_norm_forward_v2_kernel<T, Y, decltype(slots)::value, decltype(vector)::value>;
      const int threads = threads_for(in, shape);
      const dim3 grid(static_cast<unsigned>(blocks_per_group(kernel, threads, shape)),
                      static_cast<unsigned>(shape.groups));
      kernel<<<grid, threads, 0, stream>>>(operands_of<T, Y>(in, shape), shape.rows, static_cast<T*>(out), rstd);
      return cudaGetLastError();
    });
  });
}

cudaError_t gated_norm_backward_v2(const GatedNormInputs& in, const GatedNormShape& shape, const void* grad_out,
                                   const float* rstd, const GatedNormGradients& grads, cudaStream_t stream) {
  if (shape.rows == 0 || shape.channels == 0) return cudaSuccess;
  if (!gated_norm_v2_fits(in, shape)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(gated_norm_v2_partial_rows(in, shape)), static_cast<unsigned>(shape.groups));
  return dispatch_plan(in, shape, [&](auto t_tag, auto y_tag, auto slots) {
    using T = typename decltype(t_tag)::type;
    using Y = typename decltype(y_tag)::type;
    const bool vector =
        vectorized<T, Y>(in, shape, {grad_out, grads.y, grads.x, grads.z, grads.weight_partials, grads.skip_partials});
    return dispatch_vectorized(vector, [&](auto v) {
      const auto kernel = gated_norm_backward_v2_kernel<T, Y, decltype(slots)::value, decltype(v)::value>;
      kernel<<<grid, threads_for(in, shape), 0, stream>>>(
          operands_of<T, Y>(in, shape), shape.rows, static_cast<const T*>(grad_out), rstd, static_cast<Y*>(grads.y),
          static_cast<T*>(grads.x), static_cast<T*>(grads.z), grads.weight_partials, grads.skip_partials);
      return cudaGetLastError();
    });
  });
}

}  // namespace triax::mamba2::kernels
