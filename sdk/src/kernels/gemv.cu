// y = x w^T for a few rows of x (decoding at batch <= 4): one warp per output feature reads its
// row of w once, in 16-byte vectors, for every row of x, and reduces over its lanes. At one row
// the product is a matrix-vector one, bound by reading w; a GEMM library may tile it for larger
// batches and read w at a fraction of the bandwidth.
//
// The SwiGLU variant reads a fused gate/up matrix: the warp of feature n reads gate row n and up
// row n, rounds both sums as the plain product would store them, and writes silu(gate) * up, so
// that the activation's own launch and its round trip through memory go.
//
// GemvLaunch::Programmatic: the kernel is launched so that it may start while the kernel before it
// ends (programmatic_launch.cuh). Each lane loads its first vectors of the warp's weight rows into
// registers (HeldWeights: up to 16 16-byte vectors a lane), which no kernel writes, then waits for
// the earlier kernel before it reads x: the weight stream overlaps that kernel's tail. The sums
// keep the plain kernel's order (the same bits).
#include "gemv_warp.cuh"
#include "programmatic_launch.cuh"
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

// 16-byte vectors a lane of the programmatic kernel holds in registers over its P weight rows (64
// registers), or half as many where they cover the row (a slot never loaded costs occupancy).
constexpr int kHeldVectors = 16;

template <typename T, int R, bool kSwiglu, int K>
__global__ void programmatic_gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                         int64_t out_features, int64_t in_features) {
  constexpr int P = kSwiglu ? 2 : 1;
  const int64_t feature = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (feature >= out_features) return;
  const T* rows[P];
#pragma unroll
  for (int p = 0; p < P; ++p) rows[p] = w + (feature + p * out_features) * in_features;
  HeldWeights<T, P, K> held;
  held.load(rows, in_features, static_cast<int64_t>(lane) * kVectorWidth<T>);
  wait_for_earlier_kernel();  // x is the earlier kernel's output
  // The next kernel reads nothing of this one's before its own wait; starting it now lets it hold
  // its weights while this one streams the rest of its own (no more than two kernels in flight).
  let_next_kernel_start();
  warp_gemv_held_rows<T, R, P, K>(held, rows, x, y, feature, out_features, in_features, lane);
}

template <typename T, int R, bool kSwiglu>
cudaError_t launch(const void* x, const void* w, void* y, int64_t out_features, int64_t in_features, GemvLaunch how,
                   cudaStream_t stream) {
  const unsigned grid = grid_for(out_features, kWarpsPerBlock);
  const auto* x_ = static_cast<const T*>(x);
  const auto* w_ = static_cast<const T*>(w);
  auto* y_ = static_cast<T*>(y);
  if (how == GemvLaunch::Stream) {
    gemv_kernel<T, R, kSwiglu><<<grid, kWarpsPerBlock * 32, 0, stream>>>(x_, w_, y_, out_features, in_features);
    return cudaGetLastError();
  }
  constexpr int P = kSwiglu ? 2 : 1, K = kHeldVectors / P;
  const KernelLaunch run(dim3(grid), dim3(kWarpsPerBlock * 32), 0, stream, /*programmatic=*/true);
  // 1.7b's hidden size, 2048 bf16 elements, is 8 vectors a lane: its products hold half.
  if (in_features <= (K / 2) * 32 * kVectorWidth<T>)
    return run(programmatic_gemv_kernel<T, R, kSwiglu, K / 2>, x_, w_, y_, out_features, in_features);
  return run(programmatic_gemv_kernel<T, R, kSwiglu, K>, x_, w_, y_, out_features, in_features);
}

template <bool kSwiglu>
cudaError_t dispatch(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                     int64_t in_features, GemvLaunch how, cudaStream_t stream) {
  if (rows < 1 || rows > kGemvMaxRows) return cudaErrorInvalidValue;
  if (out_features == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Launch = cudaError_t (*)(const void*, const void*, void*, int64_t, int64_t, GemvLaunch, cudaStream_t);
    // The rows of x as a template argument: their sums stay in registers.
    constexpr Launch by_rows[kGemvMaxRows] = {launch<T, 1, kSwiglu>, launch<T, 2, kSwiglu>, launch<T, 3, kSwiglu>,
                                              launch<T, 4, kSwiglu>};
    return by_rows[rows - 1](x, w, y, out_features, in_features, how, stream);
  });
}

}  // namespace

bool gemv_applies(int64_t rows, int64_t in_features, int element_size, const void* x, const void* w, const void* y) {
  return rows >= 1 && rows <= kGemvMaxRows && in_features % (16 / element_size) == 0 && aligned16(x) &&
         aligned16(w) && aligned16(y);
}

cudaError_t gemv(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                 int64_t in_features, cudaStream_t stream, GemvLaunch how) {
  return dispatch<false>(dtype, x, w, y, rows, out_features, in_features, how, stream);
}

cudaError_t gemv_swiglu(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                        int64_t in_features, cudaStream_t stream, GemvLaunch how) {
  return dispatch<true>(dtype, x, w, y, rows, out_features, in_features, how, stream);
}

}  // namespace triax::kernels
