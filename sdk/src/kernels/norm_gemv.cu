// y = rms_norm(x + pending) w^T for a few rows (decoding at batch <= 4) in one launch: the norm
// before a GEMV folded into it. Every block normalises the rows itself into shared memory (the
// hidden size is small: 2048 values at 1.7b, read from L2) before its warps read their rows of w
// as gemv.cu's kernel does; block 0 also writes the residual sum. One launch and one round trip
// of the normalised rows through memory fewer than add_rms_norm then gemv.
//
// The bits are those of rms_norm.cu's forward then gemv.cu: the sum of squares is reduced in the
// norm kernel's order (its block of row_threads(...) threads, replayed here as "virtual" warps),
// each value is rounded where that kernel stores it, and each warp sums its products in gemv's
// order. Without a norm weight the kernel is gemv.cu's product (x read as it is).
//
// Programmatic dependent launch (NormGemvOperands::programmatic_launch): launched so that it may
// start while the kernel before it in the stream ends; it asks L2 for its weight rows (which no
// earlier kernel writes), then waits for that kernel (cudaGridDependencySynchronize) before it
// reads x or writes anything. It lets the next such launch start as soon as all its blocks run.
// Without the launch attribute the wait returns at once, and the trigger does nothing.
#include "gemv_warp.cuh"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;  // more than gemv's 4: the norm's prologue is per block

// The row r of the normalised input, staged in `normed` (shared memory, [rows, in_features]).
// kAdd: the row normalised is round(x + pending), written to `sum` by block 0.
template <typename T, bool kAdd>
__device__ void stage_normalised_row(const T* __restrict__ x, const T* __restrict__ pending,
                                     const T* __restrict__ norm_weight, T* __restrict__ sum, T* normed,
                                     int64_t in_features, int norm_threads, float eps, float* scratch) {
  constexpr int V = kVectorWidth<T>;
  const int64_t packs = in_features / V;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, norm_warps = norm_threads / 32;
  // Thread t of rms_norm's block (warp t / 32) sums the squares of packs t, t + norm_threads, ...
  for (int virtual_warp = warp; virtual_warp < norm_warps; virtual_warp += kWarpsPerBlock) {
    const int t = virtual_warp * 32 + lane;
    float squares = 0.f;
    for (int64_t p = t; p < packs; p += norm_threads) {
      Pack<T, V> xv = load_pack<T, V>(x + p * V);
      if constexpr (kAdd) {
        const Pack<T, V> rv = load_pack<T, V>(pending + p * V);
#pragma unroll
        for (int k = 0; k < V; ++k) xv.v[k] = from_float<T>(to_float(xv.v[k]) + to_float(rv.v[k]));
        if (blockIdx.x == 0) store_pack<T, V>(sum + p * V, xv);
      }
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float v = to_float(xv.v[k]);
        squares += v * v;
      }
      store_pack<T, V>(normed + p * V, xv);
    }
    squares = warp_reduce(squares, SumOp());
    if (lane == 0) scratch[virtual_warp] = squares;
  }
  __syncthreads();
  if (warp == 0) {  // block_reduce's second stage over norm_warps partial sums
    float partial = lane < norm_warps ? scratch[lane] : 0.f;
    partial = warp_reduce(partial, SumOp());
    if (lane == 0) scratch[32] = partial;
  }
  __syncthreads();
  const float r = rsqrtf(scratch[32] / static_cast<float>(in_features) + eps);
  __syncthreads();  // scratch is the next row's
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack<T, V> xv = load_pack<T, V>(normed + p * V);
    const Pack<T, V> wv = load_pack<T, V>(norm_weight + p * V);
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = from_float<T>(rounded_to<T>(to_float(xv.v[k]) * r) * to_float(wv.v[k]));
    store_pack<T, V>(normed + p * V, out);
  }
}

// A line of the warp's weight rows into L2 ahead of its loads (before the wait for the earlier
// kernel, and before the norm's prologue).
__device__ __forceinline__ void prefetch_to_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// kSwiglu: w holds 2 x out_features rows (gate, then up) and y out_features columns, as in gemv.cu.
// kNorm: x normalised first (kAdd: x + pending), else read as it is.
template <typename T, int R, bool kSwiglu, bool kNorm, bool kAdd>
__global__ void norm_gemv_kernel(const T* __restrict__ x, const T* __restrict__ pending,
                                 const T* __restrict__ norm_weight, T* __restrict__ sum, const T* __restrict__ w,
                                 T* __restrict__ y, int64_t out_features, int64_t in_features, int norm_threads,
                                 float eps) {
  constexpr int P = kSwiglu ? 2 : 1;
  const int64_t feature = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const bool has_feature = feature < out_features;
  const T* rows[P];
#pragma unroll
  for (int p = 0; p < P; ++p) rows[p] = w + (has_feature ? feature + p * out_features : 0) * in_features;
  constexpr int kLine = 128 / sizeof(T);  // elements of a 128-byte line: one prefetch each
  if (has_feature)
    for (int64_t i = static_cast<int64_t>(lane) * kLine; i < in_features; i += 32 * kLine)
#pragma unroll
      for (int p = 0; p < P; ++p) prefetch_to_l2(rows[p] + i);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A programmatic launch after this one may start once every block of this one runs (it waits
  // for this one's end before it reads or writes anything but its weights).
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();  // the earlier kernel's outputs (x, pending) are complete
#endif

  extern __shared__ __align__(16) unsigned char shared_bytes[];
  const T* inputs = x;
  if constexpr (kNorm) {
    T* normed = reinterpret_cast<T*>(shared_bytes);
    __shared__ float scratch[33];
#pragma unroll
    for (int r = 0; r < R; ++r)
      stage_normalised_row<T, kAdd>(x + r * in_features, kAdd ? pending + r * in_features : nullptr, norm_weight,
                                    kAdd ? sum + r * in_features : nullptr, normed + r * in_features, in_features,
                                    norm_threads, eps, scratch);
    __syncthreads();
    inputs = normed;
  }
  if (!has_feature) return;
  warp_gemv_rows<T, R, P>(rows, inputs, y, feature, out_features, in_features, lane);
}

template <typename T, int R, bool kSwiglu>
cudaError_t launch(const NormGemvOperands& o, cudaStream_t stream) {
  const bool norm = o.norm_weight != nullptr;
  const size_t shared = norm ? static_cast<size_t>(R * o.in_features) * sizeof(T) : 0;
  cudaLaunchAttribute programmatic;
  programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  programmatic.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid_for(o.out_features, kWarpsPerBlock));
  config.blockDim = dim3(kWarpsPerBlock * 32);
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &programmatic;
  config.numAttrs = o.programmatic_launch ? 1 : 0;
  // rms_norm.cu's block for these rows: the order its sum of squares is reduced in.
  const int norm_threads = row_threads(o.in_features / kVectorWidth<T>, kRmsNormMaxThreads);
  auto run = [&](auto kernel) {
    if (const cudaError_t status = allow_dynamic_shared_memory(kernel, shared); status != cudaSuccess) return status;
    return cudaLaunchKernelEx(&config, kernel, static_cast<const T*>(o.x), static_cast<const T*>(o.pending),
                              static_cast<const T*>(o.norm_weight), static_cast<T*>(o.sum), static_cast<const T*>(o.w),
                              static_cast<T*>(o.y), o.out_features, o.in_features, norm_threads, o.eps);
  };
  if (!norm) return run(norm_gemv_kernel<T, R, kSwiglu, false, false>);
  return o.pending != nullptr ? run(norm_gemv_kernel<T, R, kSwiglu, true, true>)
                              : run(norm_gemv_kernel<T, R, kSwiglu, true, false>);
}

template <bool kSwiglu>
cudaError_t dispatch(Dtype dtype, const NormGemvOperands& o, cudaStream_t stream) {
  if (o.rows < 1 || o.rows > kGemvMaxRows) return cudaErrorInvalidValue;
  if (o.out_features == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Launch = cudaError_t (*)(const NormGemvOperands&, cudaStream_t);
    constexpr Launch by_rows[kGemvMaxRows] = {launch<T, 1, kSwiglu>, launch<T, 2, kSwiglu>, launch<T, 3, kSwiglu>,
                                              launch<T, 4, kSwiglu>};
    return by_rows[o.rows - 1](o, stream);
  });
}

}  // namespace

bool norm_gemv_applies(const NormGemvOperands& o, int element_size) {
  if (!gemv_applies(o.rows, o.in_features, element_size, o.x, o.w, o.y)) return false;
  if (o.norm_weight == nullptr) return o.pending == nullptr;
  if (o.rows * o.in_features * element_size > kNormGemvMaxStagedBytes || !aligned16(o.norm_weight)) return false;
  return o.pending == nullptr || (aligned16(o.pending) && o.sum != nullptr && aligned16(o.sum));
}

cudaError_t norm_gemv(Dtype dtype, const NormGemvOperands& operands, cudaStream_t stream) {
  return dispatch<false>(dtype, operands, stream);
}

cudaError_t norm_gemv_swiglu(Dtype dtype, const NormGemvOperands& operands, cudaStream_t stream) {
  return dispatch<true>(dtype, operands, stream);
}

}  // namespace triax::kernels
