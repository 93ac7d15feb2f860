// SwiGLU, silu(gate) * up, and its gradient: elementwise over rows whose gate and up may sit in one
// tensor (a fused gate/up GEMM's [rows, 2 x cols] output), 16-byte vectors where sizes and pointers
// allow. Blocks walk rows and column vectors in grid-stride loops, so no thread divides an index.
// Either way the output's amax can be folded into slots for the fp8 product that reads it
// (kernels.hpp, kAmaxSlots).
#include <type_traits>

#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxRowBlocks = 65535;  // gridDim.y's limit

// Column vectors of one row: this thread's first, and the stride between its next ones.
__device__ __forceinline__ int64_t first_pack() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t pack_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// kAmax (both kernels): the largest |output| folded into amax_slots (an fp8 product reads it).
template <typename T, int N, bool kAmax>
__global__ void swiglu_forward_kernel(const T* __restrict__ gate, const T* __restrict__ up, int64_t in_stride,
                                      T* __restrict__ y, int64_t out_stride, float* __restrict__ amax_slots,
                                      int64_t rows, int64_t packs) {
  float amax = 0.f;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const T* g_row = gate + r * in_stride;
    const T* u_row = up + r * in_stride;
    T* y_row = y + r * out_stride;
    for (int64_t p = first_pack(); p < packs; p += pack_stride()) {
      const Pack<T, N> gv = load_pack<T, N>(g_row + p * N);
      const Pack<T, N> uv = load_pack<T, N>(u_row + p * N);
      Pack<T, N> out;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float g = to_float(gv.v[k]);
        out.v[k] = from_float<T>(swiglu_of(g, to_float(uv.v[k])));
        if constexpr (kAmax) amax = abs_max(amax, to_float(out.v[k]));
      }
      store_pack<T, N>(y_row + p * N, out);
    }
  }
  if constexpr (kAmax) {
    __shared__ float scratch[33];
    fold_block_amax(amax, scratch, amax_slots);
  }
}

// kOutput: y (laid out as grad_y) is written too, with the forward kernel's bits: a backward that
// did not keep y gets it from the same read of gate and up.
template <typename T, int N, bool kOutput, bool kAmax>
__global__ void swiglu_backward_kernel(const T* __restrict__ grad_y, int64_t out_stride, const T* __restrict__ gate,
                                       const T* __restrict__ up, T* __restrict__ grad_gate, T* __restrict__ grad_up,
                                       T* __restrict__ y, int64_t in_stride, float* __restrict__ amax_slots,
                                       int64_t rows, int64_t packs) {
  float amax = 0.f;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const T* d_row = grad_y + r * out_stride;
    const T* g_row = gate + r * in_stride;
    const T* u_row = up + r * in_stride;
    T* dg_row = grad_gate + r * in_stride;
    T* du_row = grad_up + r * in_stride;
    for (int64_t p = first_pack(); p < packs; p += pack_stride()) {
      const Pack<T, N> dv = load_pack<T, N>(d_row + p * N);
      const Pack<T, N> gv = load_pack<T, N>(g_row + p * N);
      const Pack<T, N> uv = load_pack<T, N>(u_row + p * N);
      Pack<T, N> dg, du, out;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float d = to_float(dv.v[k]);
        const float g = to_float(gv.v[k]);
        const float s = sigmoid(g);
        // silu'(g) = s (1 + g (1 - s))
        dg.v[k] = from_float<T>(d * to_float(uv.v[k]) * s * (1.f + g * (1.f - s)));
        du.v[k] = from_float<T>(d * g * s);
        if constexpr (kOutput) out.v[k] = from_float<T>(g * s * to_float(uv.v[k]));  // as the forward kernel
        if constexpr (kAmax) amax = abs_max(abs_max(amax, to_float(dg.v[k])), to_float(du.v[k]));
      }
      store_pack<T, N>(dg_row + p * N, dg);
      store_pack<T, N>(du_row + p * N, du);
      if constexpr (kOutput) store_pack<T, N>(y + r * out_stride + p * N, out);
    }
  }
  if constexpr (kAmax) {
    __shared__ float scratch[33];
    fold_block_amax(amax, scratch, amax_slots);
  }
}

// Whole 16-byte vectors tile every row: the row length, both strides and every pointer allow them.
template <typename T>
bool rows_vectorizable(int64_t cols, int64_t in_stride, int64_t out_stride,
                       std::initializer_list<const void*> pointers) {
  constexpr int N = kVectorWidth<T>;
  return in_stride % N == 0 && out_stride % N == 0 && vectorizable<T>(cols, pointers);
}

// A block of threads per run of column vectors (fewer threads for a short row), a block row per row.
dim3 threads_for(int64_t packs) { return dim3(static_cast<unsigned>(row_threads(packs, kThreads))); }
dim3 grid_for_rows(int64_t rows, int64_t packs, int threads) {
  return dim3(grid_for(packs, threads), static_cast<unsigned>(std::min<int64_t>(rows, kMaxRowBlocks)));
}

}  // namespace

cudaError_t swiglu_forward(Dtype dtype, const void* gate, const void* up, int64_t in_stride, void* y,
                           int64_t out_stride, float* amax_slots, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel, int64_t packs) {
      const dim3 threads = threads_for(packs);
      kernel<<<grid_for_rows(rows, packs, threads.x), threads, 0, stream>>>(
          static_cast<const T*>(gate), static_cast<const T*>(up), in_stride, static_cast<T*>(y), out_stride,
          amax_slots, rows, packs);
      return cudaGetLastError();
    };
    constexpr int N = kVectorWidth<T>;
    if (rows_vectorizable<T>(cols, in_stride, out_stride, {gate, up, y}))
      return amax_slots ? launch(swiglu_forward_kernel<T, N, true>, cols / N)
                        : launch(swiglu_forward_kernel<T, N, false>, cols / N);
    return amax_slots ? launch(swiglu_forward_kernel<T, 1, true>, cols) : launch(swiglu_forward_kernel<T, 1, false>, cols);
  });
}

cudaError_t swiglu_backward(Dtype dtype, const void* grad_y, int64_t out_stride, const void* gate, const void* up,
                            void* grad_gate, void* grad_up, void* y, int64_t in_stride, float* amax_slots,
                            int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel, int64_t packs) {
      const dim3 threads = threads_for(packs);
      kernel<<<grid_for_rows(rows, packs, threads.x), threads, 0, stream>>>(
          static_cast<const T*>(grad_y), out_stride, static_cast<const T*>(gate), static_cast<const T*>(up),
          static_cast<T*>(grad_gate), static_cast<T*>(grad_up), static_cast<T*>(y), in_stride, amax_slots, rows,
          packs);
      return cudaGetLastError();
    };
    // The kernel for N elements a vector, with or without the output and the amax.
    auto launch_width = [&](auto width, int64_t packs) {
      return dispatch_switches(y != nullptr, amax_slots != nullptr, [&](auto output, auto amax) {
        return launch(swiglu_backward_kernel<T, decltype(width)::value, output.value, amax.value>, packs);
      });
    };
    constexpr int N = kVectorWidth<T>;
    if (rows_vectorizable<T>(cols, in_stride, out_stride, {grad_y, gate, up, grad_gate, grad_up, y}))
      return launch_width(std::integral_constant<int, N>(), cols / N);
    return launch_width(std::integral_constant<int, 1>(), cols);
  });
}

}  // namespace triax::kernels
