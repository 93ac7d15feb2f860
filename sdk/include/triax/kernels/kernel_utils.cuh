// Device helpers shared by the SDK's kernels and plugins' (.cu files only): dtype conversion,
// 16-byte vector access, warp and block reductions, and the host-side dtype dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "triax/kernels/kernels.hpp"

namespace triax::kernels {

// ---- element conversion: every kernel computes in fp32 ---------------------------------------

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// Round to nearest even, as LibTorch's casts do.
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// v rounded to T's precision, back in fp32: where LibTorch's composition stores an intermediate.
template <typename T>
__device__ __forceinline__ float rounded_to(float v) {
  return to_float(from_float<T>(v));
}

// ---- activations ----------------------------------------------------------------------------

__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }
// SwiGLU's output element, silu(g) * u, as every kernel that writes it computes it (same bits).
__device__ __forceinline__ float swiglu_of(float g, float u) { return g * sigmoid(g) * u; }

// ---- vector access ---------------------------------------------------------------------------

// N consecutive elements moved by one load or store (16 bytes when N = 16 / sizeof(T)).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, N>*>(p);
}

template <typename T, int N>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, N>& value) {
  *reinterpret_cast<Pack<T, N>*>(p) = value;
}

// Elements per 16-byte vector.
template <typename T>
constexpr int kVectorWidth = static_cast<int>(16 / sizeof(T));

// N elements of T at p as fp32 values out[0 .. N), by 16-byte loads (N a multiple of the vector
// width; p 16-byte aligned).
template <typename T, int N>
__device__ __forceinline__ void load_floats(const T* p, float* out) {
  constexpr int W = kVectorWidth<T>;
  static_assert(N % W == 0, "whole 16-byte vectors");
#pragma unroll
  for (int k = 0; k < N; k += W) {
    const Pack<T, W> pack = load_pack<T, W>(p + k);
#pragma unroll
    for (int j = 0; j < W; ++j) out[k + j] = to_float(pack.v[j]);
  }
}

// The fp32 values v[0 .. N) stored as N elements of T at p, each rounded once, by 16-byte stores.
template <typename T, int N>
__device__ __forceinline__ void store_floats(T* p, const float* v) {
  constexpr int W = kVectorWidth<T>;
  static_assert(N % W == 0, "whole 16-byte vectors");
#pragma unroll
  for (int k = 0; k < N; k += W) {
    Pack<T, W> pack;
#pragma unroll
    for (int j = 0; j < W; ++j) pack.v[j] = from_float<T>(v[k + j]);
    store_pack<T, W>(p + k, pack);
  }
}

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// True when 16-byte vectors tile every row of `row_elements` elements: the row length is a
// multiple of the vector width and every base pointer is 16-byte aligned.
template <typename T>
bool vectorizable(int64_t row_elements, std::initializer_list<const void*> pointers) {
  if (row_elements % kVectorWidth<T> != 0) return false;
  for (const void* p : pointers)
    if (!aligned16(p)) return false;
  return true;
}

// ---- reductions ------------------------------------------------------------------------------

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The reduction of v over the whole block, returned to every thread. Every thread of the block
// calls it; blockDim.x is a multiple of 32. scratch: 33 floats of shared memory, free again when
// the call returns.
template <typename Op>
__device__ float block_reduce(float v, float* scratch, Op op, float identity) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x / 32);
    float w = lane < warps ? scratch[lane] : identity;
    w = warp_reduce(w, op);
    if (lane == 0) scratch[32] = w;
  }
  __syncthreads();
  const float result = scratch[32];
  __syncthreads();
  return result;
}

// ---- amax slots (the amax of a kernel's output, for the fp8 product that reads it) -----------

// max that keeps NaN, as LibTorch's max reduction does (fmaxf would drop it).
struct NanMaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return (a != a || a > b) ? a : b; }
};

// running = max(running, |v|), NaN kept.
__device__ __forceinline__ float abs_max(float running, float v) { return NanMaxOp()(fabsf(v), running); }

// *slot = max(*slot, amax) for amaxes (never negative: fabsf clears the sign, NaN's too), which
// order as their bits do, with NaN above infinity: an integer atomicMax on the bits is the float
// max that keeps NaN. *slot starts at zero (or another amax).
__device__ __forceinline__ void atomic_amax(float* slot, float amax) {
  atomicMax(reinterpret_cast<unsigned*>(slot), __float_as_uint(amax));
}

// Folds the block's largest |value| (each thread's running abs_max) into one of kAmaxSlots slots
// (kernels.hpp), by the block's index. Every thread of the block calls it. The values are never
// negative (fabsf clears the sign, NaN's too), and such floats order as their bits do, with NaN
// above infinity: an integer atomicMax on the bits is the float max that keeps NaN. Spread over
// the slots, no address takes more than 1/32 of a grid's atomics.
__device__ __forceinline__ void fold_block_amax(float thread_amax, float* scratch, float* slots) {
  const float block_amax = block_reduce(thread_amax, scratch, NanMaxOp(), 0.0f);
  if (threadIdx.x != 0 || threadIdx.y != 0) return;
  const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
  atomic_amax(slots + block % kAmaxSlots, block_amax);
}

// The fp8 scale and multiplier of an amax, in the fp32 arithmetic of LibTorch's CUDA ops that
// fp8::scales_from_amax runs (every fp8 kernel computes them so, to the same bits):
//   amax'      = max(amax, floor)            (NaN stays NaN, as clamp_min)
//   scale      = amax' x fp32(1 / largest)   (LibTorch's division of a CUDA tensor by a scalar)
//   multiplier = fp32(1 / amax') x largest
struct Fp8Scale {
  float scale, multiplier;
};
__device__ __forceinline__ Fp8Scale fp8_scale_of(float amax, float largest, float amax_floor) {
  const float floored = amax != amax ? amax : fmaxf(amax, amax_floor);
  return {__fmul_rn(floored, __fdiv_rn(1.0f, largest)), __fmul_rn(__fdiv_rn(1.0f, floored), largest)};
}

// ---- launch helpers (host) -------------------------------------------------------------------

// Threads for a block that walks one row of `packs` vectors: a multiple of 32 in [32, max_threads].
inline int row_threads(int64_t packs, int max_threads) {
  const int64_t rounded = (packs + 31) / 32 * 32;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(rounded, 32), max_threads));
}

// Blocks for a grid-stride loop over `work` items of `per_block` each (at least 1).
inline unsigned grid_for(int64_t work, int64_t per_block, int64_t max_blocks = int64_t{1} << 20) {
  const int64_t blocks = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), max_blocks));
}

// Lets `kernel` take `bytes` of dynamic shared memory: a kernel whose static and dynamic shared
// memory together pass 48 KiB must opt in (48 KiB of dynamic memory beside a static array is
// refused at launch as an invalid argument).
template <typename Kernel>
cudaError_t allow_dynamic_shared_memory(Kernel kernel, size_t bytes) {
  constexpr size_t kWithoutOptIn = 48 * 1024;
  if (bytes == 0) return cudaSuccess;
  cudaFuncAttributes attributes;
  const cudaError_t read = cudaFuncGetAttributes(&attributes, kernel);
  if (read != cudaSuccess) return read;
  if (attributes.sharedSizeBytes + bytes <= kWithoutOptIn) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with the C++ element type of dtype.
template <typename F>
cudaError_t dispatch_dtype(Dtype dtype, F&& f) {
  switch (dtype) {
    case Dtype::Float32:
      return f(TypeTag<float>{});
    case Dtype::BFloat16:
      return f(TypeTag<__nv_bfloat16>{});
    case Dtype::Float16:
      return f(TypeTag<__half>{});
  }
  return cudaErrorInvalidValue;
}

// Calls f(std::bool_constant<a>{}, std::bool_constant<b>{}) for the run-time a and b: a kernel's
// two compile-time switches (one instance per combination) chosen at launch.
template <typename F>
cudaError_t dispatch_switches(bool a, bool b, F&& f) {
  if (a) return b ? f(std::true_type{}, std::true_type{}) : f(std::true_type{}, std::false_type{});
  return b ? f(std::false_type{}, std::true_type{}) : f(std::false_type{}, std::false_type{});
}

}  // namespace triax::kernels
