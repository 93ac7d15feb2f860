// The gated norm's first kernels, v1 (gated_norm_kernels.hpp; v2 in gated_norm_v2.cu). Forward:
// one block per (row, group), two passes over the group's channels (the sum of squares, then the
// output), nothing kept but rstd. Backward: a fixed grid of blocks, each walking rows; every thread
// owns the same channels of every row, so the weight's and D's per-channel sums need no atomics and
// come out the same on every run.
#include <type_traits>

#include "gated_norm_operands.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace triax::kernels;  // the SDK's device helpers (kernel_utils.cuh)

constexpr int kMaxThreads = 256;
// Blocks of the backward: each sums its rows' weight and D terms; the caller adds the partials.
constexpr int64_t kBackwardBlocks = 1024;

// One channel's terms: s = y + D x (the skip added), the gate silu(z) = z sig.
struct Terms {
  float s, x, z, sig;
};

template <typename T, typename Y>
__device__ __forceinline__ Terms terms_at(const Operands<T, Y>& o, int64_t row, int64_t group, int64_t c) {
  const int64_t channel = group * o.channels + c;
  const float x = to_float(o.x[row * o.xs.row_stride + group * o.xs.group_stride + c]);
  const float z = to_float(o.z[row * o.zs.row_stride + group * o.zs.group_stride + c]);
  const float y = to_float(o.y[row * o.ys.row_stride + group * o.ys.group_stride + c]);
  return {y + o.D[channel / o.head_dim] * x, x, z, gate_sigmoid(z)};
}

__device__ __forceinline__ ElementBackward element(const Terms& t, float g, float w, float r) {
  return {t.s, t.z, t.sig, g, w, r};
}

template <typename T, typename Y>
__global__ void gated_norm_forward_kernel(Operands<T, Y> o, int64_t rows, T* __restrict__ out,
                                          float* __restrict__ rstd) {
  __shared__ float scratch[33];
  const int64_t width = o.groups * o.channels;
  for (int64_t item = blockIdx.x; item < rows * o.groups; item += gridDim.x) {
    const int64_t row = item / o.groups, group = item % o.groups;
    float squares = 0.f;
    for (int64_t c = threadIdx.x; c < o.channels; c += blockDim.x) {
      const Terms t = terms_at(o, row, group, c);
      const float gated = t.s * t.z * t.sig;
      squares += gated * gated;
    }
    const float r = rsqrtf(block_reduce(squares, scratch, SumOp{}, 0.f) / static_cast<float>(o.channels) + o.eps);
    if (threadIdx.x == 0) rstd[item] = r;
    T* out_row = out + row * width + group * o.channels;
    for (int64_t c = threadIdx.x; c < o.channels; c += blockDim.x) {
      const Terms t = terms_at(o, row, group, c);
      out_row[c] = from_float<T>(t.s * t.z * t.sig * r * o.weight[group * o.channels + c]);
    }
  }
}

// shared: [2][groups channels] fp32, this block's sums of the weight's and the skip's terms.
template <typename T, typename Y>
__global__ void gated_norm_backward_kernel(Operands<T, Y> o, int64_t rows, const T* __restrict__ grad_out,
                                           const float* __restrict__ rstd, Y* __restrict__ grad_y,
                                           T* __restrict__ grad_x, T* __restrict__ grad_z,
                                           float* __restrict__ weight_partials, float* __restrict__ skip_partials) {
  __shared__ float scratch[33];
  extern __shared__ float sums[];
  const int64_t width = o.groups * o.channels;
  float* weight_sums = sums;
  float* skip_sums = sums + width;
  for (int64_t i = threadIdx.x; i < 2 * width; i += blockDim.x) sums[i] = 0.f;
  __syncthreads();
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    for (int64_t group = 0; group < o.groups; ++group) {
      const float r = rstd[row * o.groups + group];
      const int64_t base = row * width + group * o.channels;
      float dot = 0.f;  // sum over the group of d(normed) * normed
      for (int64_t c = threadIdx.x; c < o.channels; c += blockDim.x) {
        const Terms t = terms_at(o, row, group, c);
        dot += element(t, to_float(grad_out[base + c]), o.weight[group * o.channels + c], r).dot_term();
      }
      const float mean_dot = block_reduce(dot, scratch, SumOp{}, 0.f) / static_cast<float>(o.channels);
      for (int64_t c = threadIdx.x; c < o.channels; c += blockDim.x) {
        const int64_t channel = group * o.channels + c;
        const Terms t = terms_at(o, row, group, c);
        const ElementGradients d =
            element_gradients(element(t, to_float(grad_out[base + c]), o.weight[channel], r), mean_dot);
        grad_y[base + c] = from_float<Y>(d.ds);
        grad_x[base + c] = from_float<T>(d.ds * o.D[channel / o.head_dim]);
        grad_z[base + c] = from_float<T>(d.dz);
        weight_sums[channel] += d.weight_term;
        skip_sums[channel] += d.ds * t.x;
      }
    }
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    weight_partials[blockIdx.x * width + i] = weight_sums[i];
    skip_partials[blockIdx.x * width + i] = skip_sums[i];
  }
}

}  // namespace

// None without rows: the caller's sums over the partials are then zeros.
int64_t gated_norm_partial_rows(int64_t rows) { return std::min(rows, kBackwardBlocks); }

cudaError_t gated_norm_forward(const GatedNormInputs& in, const GatedNormShape& shape, void* out, float* rstd,
                               cudaStream_t stream) {
  if (shape.rows == 0 || shape.channels == 0) return cudaSuccess;
  return dispatch_gated_norm_types(in, [&](auto t_tag, auto y_tag) {
    using T = typename decltype(t_tag)::type;
    using Y = typename decltype(y_tag)::type;
    const unsigned grid = grid_for(shape.rows * shape.groups, 1, int64_t{1} << 30);
    const int threads = row_threads(shape.channels, kMaxThreads);
    gated_norm_forward_kernel<T, Y><<<grid, threads, 0, stream>>>(operands_of<T, Y>(in, shape), shape.rows,
                                                                  static_cast<T*>(out), rstd);
    return cudaGetLastError();
  });
}

cudaError_t gated_norm_backward(const GatedNormInputs& in, const GatedNormShape& shape, const void* grad_out,
                                const float* rstd, const GatedNormGradients& grads, cudaStream_t stream) {
  if (shape.rows == 0 || shape.channels == 0) return cudaSuccess;
  return dispatch_gated_norm_types(in, [&](auto t_tag, auto y_tag) {
    using T = typename decltype(t_tag)::type;
    using Y = typename decltype(y_tag)::type;
    const auto kernel = gated_norm_backward_kernel<T, Y>;
    const size_t shared = 2 * sizeof(float) * static_cast<size_t>(shape.groups * shape.channels);
    const cudaError_t allowed = allow_dynamic_shared_memory(kernel, shared);
    if (allowed != cudaSuccess) return allowed;
    const unsigned grid = static_cast<unsigned>(gated_norm_partial_rows(shape.rows));
    const int threads = row_threads(shape.channels, kMaxThreads);
    kernel<<<grid, threads, shared, stream>>>(operands_of<T, Y>(in, shape), shape.rows,
                                              static_cast<const T*>(grad_out), rstd, static_cast<Y*>(grads.y),
                                              static_cast<T*>(grads.x), static_cast<T*>(grads.z),
                                              grads.weight_partials, grads.skip_partials);
    return cudaGetLastError();
  });
}

}  // namespace triax::mamba2::kernels
