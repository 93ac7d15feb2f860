// SwiGLU, silu(gate) * up, and its gradient: elementwise, 16-byte vectors where sizes and
// pointers allow, with a grid-stride loop.
#include "kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

template <typename T, int N>
__global__ void swiglu_forward_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ y,
                                      int64_t packs) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T, N> gv = load_pack<T, N>(gate + p * N);
    const Pack<T, N> uv = load_pack<T, N>(up + p * N);
    Pack<T, N> out;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float g = to_float(gv.v[k]);
      out.v[k] = from_float<T>(g * sigmoid(g) * to_float(uv.v[k]));
    }
    store_pack<T, N>(y + p * N, out);
  }
}

template <typename T, int N>
__global__ void swiglu_backward_kernel(const T* __restrict__ grad_y, const T* __restrict__ gate,
                                       const T* __restrict__ up, T* __restrict__ grad_gate, T* __restrict__ grad_up,
                                       int64_t packs) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T, N> dv = load_pack<T, N>(grad_y + p * N);
    const Pack<T, N> gv = load_pack<T, N>(gate + p * N);
    const Pack<T, N> uv = load_pack<T, N>(up + p * N);
    Pack<T, N> dg, du;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float d = to_float(dv.v[k]);
      const float g = to_float(gv.v[k]);
      const float s = sigmoid(g);
      // silu'(g) = s (1 + g (1 - s))
      dg.v[k] = from_float<T>(d * to_float(uv.v[k]) * s * (1.f + g * (1.f - s)));
      du.v[k] = from_float<T>(d * g * s);
    }
    store_pack<T, N>(grad_gate + p * N, dg);
    store_pack<T, N>(grad_up + p * N, du);
  }
}

}  // namespace

cudaError_t swiglu_forward(Dtype dtype, const void* gate, const void* up, void* y, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = static_cast<const T*>(gate);
    const T* u = static_cast<const T*>(up);
    T* out = static_cast<T*>(y);
    if (vectorizable<T>(count, {gate, up, y})) {
      constexpr int N = kVectorWidth<T>;
      swiglu_forward_kernel<T, N><<<grid_for(count / N, kThreads), kThreads, 0, stream>>>(g, u, out, count / N);
    } else {
      swiglu_forward_kernel<T, 1><<<grid_for(count, kThreads), kThreads, 0, stream>>>(g, u, out, count);
    }
    return cudaGetLastError();
  });
}

cudaError_t swiglu_backward(Dtype dtype, const void* grad_y, const void* gate, const void* up, void* grad_gate,
                            void* grad_up, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* d = static_cast<const T*>(grad_y);
    const T* g = static_cast<const T*>(gate);
    const T* u = static_cast<const T*>(up);
    T* dg = static_cast<T*>(grad_gate);
    T* du = static_cast<T*>(grad_up);
    if (vectorizable<T>(count, {grad_y, gate, up, grad_gate, grad_up})) {
      constexpr int N = kVectorWidth<T>;
      swiglu_backward_kernel<T, N><<<grid_for(count / N, kThreads), kThreads, 0, stream>>>(d, g, u, dg, du, count / N);
    } else {
      swiglu_backward_kernel<T, 1><<<grid_for(count, kThreads), kThreads, 0, stream>>>(d, g, u, dg, du, count);
    }
    return cudaGetLastError();
  });
}

}  // namespace triax::kernels
