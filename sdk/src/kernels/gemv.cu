// y = x w^T for a few rows of x (decoding at batch <= 4): one warp per output feature reads its
// row of w once, in 16-byte vectors, for every row of x, and reduces over its lanes. At one row
// the product is a matrix-vector one, bound by reading w; a GEMM library may tile it for larger
// batches and read w at a fraction of the bandwidth.
//
// Long rows (gemv_long_rows: decoding's down projection, 8192 long at 1.7b) can instead be split
// over a block's warps, each summing its part of the row with a chunk of loads in flight before
// its products, the parts added in shared memory: fewer loads in a row for each warp to wait on.
//
// The SwiGLU variant reads a fused gate/up matrix: the warp of feature n reads gate row n and up
// row n, rounds both sums as the plain product would store them, and writes silu(gate) * up, so
// that the activation's own launch and its round trip through memory go.
#include "gemv_warp.cuh"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

// kSwiglu: w holds 2 x out_features rows (gate, then up) and y out_features columns.
template <typename T, int R, bool kSwiglu>
__global__ void gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t out_features,
                            int64_t in_features) {
  constexpr int P = kSwiglu ? 2 : 1;  // rows of w a warp reads
  const int64_t feature = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (feature >= out_features) return;
  const T* rows[P];
#pragma unroll
  for (int p = 0; p < P; ++p) rows[p] = w + (feature + p * out_features) * in_features;
  warp_gemv_rows<T, R, P>(rows, x, y, feature, out_features, in_features, lane);
}

// Row r of x times the matrix of expert experts[r] of a stack [expert_count, out_features,
// in_features] (with SwiGLU, w the gate stack and w_up the up stack): a decoding step's MoE experts
// without grouping the rows by expert on the host. An expert index out of range gives a zero row.
template <typename T, bool kSwiglu>
__global__ void gemv_by_expert_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ w_up,
                                      const int64_t* __restrict__ experts, T* __restrict__ y, int64_t out_features,
                                      int64_t in_features, int64_t expert_count) {
  constexpr int P = kSwiglu ? 2 : 1;
  const int64_t feature = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t row = blockIdx.y;
  const int lane = threadIdx.x % 32;
  if (feature >= out_features) return;
  const int64_t expert = experts[row];
  T* y_row = y + row * out_features;
  if (expert < 0 || expert >= expert_count) {
    if (lane == 0) y_row[feature] = from_float<T>(0.f);
    return;
  }
  const int64_t offset = (expert * out_features + feature) * in_features;
  const T* rows[P];
  rows[0] = w + offset;
  if constexpr (kSwiglu) rows[P - 1] = w_up + offset;
  warp_gemv_rows<T, 1, P>(rows, x + row * in_features, y_row, feature, out_features, in_features, lane);
}

constexpr int kSplitWarps = 4;  // warps sharing a long row's feature
constexpr int kSplitChunk = 8;  // 16-byte weight loads a lane issues before their products

// 16 bytes of weights, read past L1 (each is read once).
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_streamed(const T* p) {
  static_assert(sizeof(Pack<T, V>) == 16, "16-byte packs");
  Pack<T, V> pack;
  uint4& bits = *reinterpret_cast<uint4*>(&pack);
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(bits.x), "=r"(bits.y), "=r"(bits.z), "=r"(bits.w)
               : "l"(p));
  return pack;
}

// Block b computes feature b: warp j sums part j of the row (in_features / kSplitWarps long) for
// each of the R rows of x; the parts are added in warp order.
template <typename T, int R>
__global__ void __launch_bounds__(kSplitWarps * 32)
    gemv_split_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t out_features,
                      int64_t in_features) {
  constexpr int V = kVectorWidth<T>;
  constexpr int64_t kStride = 32 * V;
  __shared__ float parts[kSplitWarps][R];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t feature = blockIdx.x, part = in_features / kSplitWarps, begin = warp * part;
  const T* row = w + feature * in_features + begin;
  const T* xs = x + begin;
  float sums[R] = {};
  int64_t i = static_cast<int64_t>(lane) * V;
  for (; i + (kSplitChunk - 1) * kStride < part; i += kSplitChunk * kStride) {
    Pack<T, V> weights[kSplitChunk];
#pragma unroll
    for (int c = 0; c < kSplitChunk; ++c) weights[c] = load_streamed<T, V>(row + i + c * kStride);
#pragma unroll
    for (int c = 0; c < kSplitChunk; ++c) add_products<T, R>(sums, weights[c], xs, in_features, i + c * kStride);
  }
  // What is left of the part: fewer than a chunk of vectors.
  for (; i < part; i += kStride) add_products<T, R>(sums, load_streamed<T, V>(row + i), xs, in_features, i);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float total = warp_reduce(sums[r], SumOp());
    if (lane == 0) parts[warp][r] = total;
  }
  __syncthreads();
  if (threadIdx.x < R) {
    float total = 0.f;
#pragma unroll
    for (int j = 0; j < kSplitWarps; ++j) total += parts[j][threadIdx.x];
    y[threadIdx.x * out_features + feature] = from_float<T>(total);
  }
}

// kSplitLongRows: rows of at least kGemvSplitMinFeatures, in whole vectors a warp, go through
// gemv_split_kernel; the others through gemv_kernel.
template <typename T, int R, bool kSwiglu, bool kSplitLongRows>
void launch(const void* x, const void* w, void* y, int64_t out_features, int64_t in_features, cudaStream_t stream) {
  if constexpr (kSplitLongRows) {
    if (in_features >= kGemvSplitMinFeatures && in_features % (kSplitWarps * kVectorWidth<T>) == 0 &&
        out_features <= 0x7fffffff) {
      gemv_split_kernel<T, R><<<static_cast<unsigned>(out_features), kSplitWarps * 32, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), out_features, in_features);
      return;
    }
  }
  const unsigned grid = grid_for(out_features, kWarpsPerBlock);
  gemv_kernel<T, R, kSwiglu><<<grid, kWarpsPerBlock * 32, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), out_features, in_features);
}

template <bool kSwiglu, bool kSplitLongRows = false>
cudaError_t dispatch(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                     int64_t in_features, cudaStream_t stream) {
  if (rows < 1 || rows > kGemvMaxRows) return cudaErrorInvalidValue;
  if (out_features == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Launch = void (*)(const void*, const void*, void*, int64_t, int64_t, cudaStream_t);
    // The rows of x as a template argument: their sums stay in registers.
    constexpr Launch by_rows[kGemvMaxRows] = {
        launch<T, 1, kSwiglu, kSplitLongRows>, launch<T, 2, kSwiglu, kSplitLongRows>,
        launch<T, 3, kSwiglu, kSplitLongRows>, launch<T, 4, kSwiglu, kSplitLongRows>};
    by_rows[rows - 1](x, w, y, out_features, in_features, stream);
    return cudaGetLastError();
  });
}

template <bool kSwiglu>
cudaError_t dispatch_by_expert(Dtype dtype, const GemvByExpertOperands& o, cudaStream_t stream) {
  if (o.rows < 1 || o.rows > 65535 || (kSwiglu && o.w_up == nullptr)) return cudaErrorInvalidValue;
  if (o.out_features == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const dim3 grid(grid_for(o.out_features, kWarpsPerBlock), static_cast<unsigned>(o.rows));
    gemv_by_expert_kernel<T, kSwiglu><<<grid, kWarpsPerBlock * 32, 0, stream>>>(
        static_cast<const T*>(o.x), static_cast<const T*>(o.w), static_cast<const T*>(o.w_up), o.experts,
        static_cast<T*>(o.y), o.out_features, o.in_features, o.expert_count);
    return cudaGetLastError();
  });
}

}  // namespace

bool gemv_by_expert_applies(const GemvByExpertOperands& o, int element_size) {
  return o.rows >= 1 && o.rows <= 65535 && o.in_features % (16 / element_size) == 0 && aligned16(o.x) &&
         aligned16(o.w) && (o.w_up == nullptr || aligned16(o.w_up)) && aligned16(o.y) && o.experts != nullptr;
}

cudaError_t gemv_by_expert(Dtype dtype, const GemvByExpertOperands& operands, cudaStream_t stream) {
  return dispatch_by_expert<false>(dtype, operands, stream);
}

cudaError_t gemv_swiglu_by_expert(Dtype dtype, const GemvByExpertOperands& operands, cudaStream_t stream) {
  return dispatch_by_expert<true>(dtype, operands, stream);
}

bool gemv_applies(int64_t rows, int64_t in_features, int element_size, const void* x, const void* w, const void* y) {
  return rows >= 1 && rows <= kGemvMaxRows && in_features % (16 / element_size) == 0 && aligned16(x) &&
         aligned16(w) && aligned16(y);
}

cudaError_t gemv(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                 int64_t in_features, cudaStream_t stream) {
  return dispatch<false>(dtype, x, w, y, rows, out_features, in_features, stream);
}

cudaError_t gemv_long_rows(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                           int64_t in_features, cudaStream_t stream) {
  return dispatch<false, /*kSplitLongRows=*/true>(dtype, x, w, y, rows, out_features, in_features, stream);
}

cudaError_t gemv_swiglu(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                        int64_t in_features, cudaStream_t stream) {
  return dispatch<true>(dtype, x, w, y, rows, out_features, in_features, stream);
}

}  // namespace triax::kernels
