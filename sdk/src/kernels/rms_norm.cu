// RMSNorm forward and backward: one thread block per row (forward), a block per group of rows
// with the weight gradient summed in shared memory (backward). Each thread owns the same vector
// slots of every row it visits, so the weight-gradient sums need no atomics and come out the
// same on every run. Both can take a residual add in front of the norm (add_rms_norm): the
// forward then also writes the sum, the backward adds the sum's own gradient. The forward's sum
// may be fp32 over 16-bit rows (add_rms_norm_fp32_residual: a residual stream kept in fp32, cast
// to the rows' dtype before the norm), an instance of the same kernel. The forward can
// fold its output's amax, the backward its input gradient's, into slots for the fp8 product that
// reads them (kernels.hpp, kAmaxSlots). The row may also be read in fp32 (a residual stream kept in
// fp32), rounded to the norm's dtype as it is loaded and written so rounded for the backward, whose
// input gradient may be written in fp32 (rms_norm_forward_fp32_input, rms_norm_backward_fp32_input).
#include <cstdint>
#include <type_traits>

#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kMaxThreads = kRmsNormMaxThreads;
// Thread blocks of the backward pass, each summing the weight gradient of rows/kBackwardBlocks
// rows; their partial sums are added by the caller. Fixed, so the summation order never changes;
// 2048 rather than 512 keeps enough warps per SM in flight to hide the loads' latency.
constexpr int64_t kBackwardBlocks = 2048;

// A pack of the sum's (or the input's) dtype S as T: the residual stream's cast to the norm's dtype
// (none when S is T).
template <typename T, typename S, int N>
__device__ __forceinline__ Pack<T, N> in_dtype(const Pack<S, N>& p) {
  if constexpr (std::is_same_v<S, T>) {
    return p;
  } else {
    Pack<T, N> out;
#pragma unroll
    for (int k = 0; k < N; ++k) out.v[k] = from_float<T>(to_float(p.v[k]));
    return out;
  }
}

// kAdd: the row normalised is round(x + residual) in T, the sum written to `sum` first (the
// residual stream) in S: T, or fp32 for a stream kept in fp32 (then cast to T before the norm).
// kAmax: max |y| folded into amax_slots (an fp8 product reads y; docs/fp8.md). X: x's dtype, T, or
// fp32 rounded to T as it is read and written so rounded to `sum` (S = T; no add): the row the
// backward reads.
template <typename T, typename X, typename S, int N, bool kAdd, bool kAmax>
__global__ void rms_norm_forward_kernel(const X* __restrict__ x, const S* __restrict__ residual,
                                        const T* __restrict__ weight, T* __restrict__ y, S* __restrict__ sum,
                                        float* __restrict__ rstd, float* __restrict__ amax_slots, int64_t rows,
                                        int64_t hidden, float eps) {
  static_assert(std::is_same_v<X, T> || (!kAdd && std::is_same_v<S, T>), "an fp32 x: no add, its row written in T");
  __shared__ float scratch[33];
  const int64_t packs = hidden / N;
  float amax = 0.f;
  constexpr bool kWritesRow = kAdd || !std::is_same_v<X, T>;  // the row normalised, to `sum`
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const X* x_row = x + row * hidden;
    T* y_row = y + row * hidden;
    S* sum_row = kWritesRow ? sum + row * hidden : nullptr;
    float squares = 0.f;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      Pack<T, N> xv = in_dtype<T>(load_pack<X, N>(x_row + p * N));
      if constexpr (kAdd) {
        const Pack<S, N> rv = load_pack<S, N>(residual + row * hidden + p * N);
        Pack<S, N> sv;
#pragma unroll
        for (int k = 0; k < N; ++k) sv.v[k] = from_float<S>(to_float(xv.v[k]) + to_float(rv.v[k]));
        store_pack<S, N>(sum_row + p * N, sv);
        xv = in_dtype<T>(sv);
      } else if constexpr (kWritesRow) {
        store_pack<S, N>(sum_row + p * N, xv);  // x rounded to T (S is T)
      }
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float v = to_float(xv.v[k]);
        squares += v * v;
      }
    }
    const float total = block_reduce(squares, scratch, SumOp{}, 0.f);
    const float r = rsqrtf(total / static_cast<float>(hidden) + eps);
    if (threadIdx.x == 0) rstd[row] = r;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      // With the row written, this thread's own stores of the first loop.
      const Pack<T, N> xv =
          kWritesRow ? in_dtype<T>(load_pack<S, N>(sum_row + p * N)) : in_dtype<T>(load_pack<X, N>(x_row + p * N));
      const Pack<T, N> wv = load_pack<T, N>(weight + p * N);
      Pack<T, N> out;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        out.v[k] = from_float<T>(rounded_to<T>(to_float(xv.v[k]) * r) * to_float(wv.v[k]));
        if constexpr (kAmax) amax = abs_max(amax, to_float(out.v[k]));
      }
      store_pack<T, N>(y_row + p * N, out);
    }
  }
  if constexpr (kAmax) fold_block_amax(amax, scratch, amax_slots);
}

// kAdd: grad_sum (the gradient that reaches x directly) is added to grad_x before rounding.
// kAmax: max |grad_x| folded into amax_slots (with the add, grad_x is the gradient of the fp8
// product whose output was added). G: the dtype of grad_sum and grad_x, T or fp32; with fp32 the
// norm's own part is rounded to T before the add, as the unfused composition's gradient of the
// cast x (same bits).
template <typename T, typename G, int N, bool kAdd, bool kAmax>
__global__ void rms_norm_backward_kernel(const T* __restrict__ grad_y, const T* __restrict__ x,
                                         const T* __restrict__ weight, const float* __restrict__ rstd,
                                         const G* __restrict__ grad_sum, G* __restrict__ grad_x,
                                         float* __restrict__ weight_partials, float* __restrict__ amax_slots,
                                         int64_t rows, int64_t hidden) {
  __shared__ float scratch[33];
  float amax = 0.f;
  // [N][packs]: element k of pack p at k * packs + p, so a warp's 32 threads, each adding to its
  // own pack's element k, hit 32 consecutive banks (the row's order, p * N + k, made N of them
  // share a bank: an N-way conflict on every add).
  extern __shared__ float weight_sums[];
  const int64_t packs = hidden / N;
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x)
#pragma unroll
    for (int k = 0; k < N; ++k) weight_sums[k * packs + p] = 0.f;

  // The input gradient of one row whose mean of (grad_y * weight) * normalised x is known; its
  // weight-gradient terms join the sums in the row's order.
  auto finish_row = [&](int64_t row, float r, float mean_dot) {
    const T* g_row = grad_y + row * hidden;
    const T* x_row = x + row * hidden;
    G* gx_row = grad_x + row * hidden;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> gv = load_pack<T, N>(g_row + p * N);
      const Pack<T, N> xv = load_pack<T, N>(x_row + p * N);
      const Pack<T, N> wv = load_pack<T, N>(weight + p * N);
      Pack<G, N> out, direct;
      if constexpr (kAdd) direct = load_pack<G, N>(grad_sum + row * hidden + p * N);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float g = to_float(gv.v[k]);
        const float n = to_float(xv.v[k]) * r;
        float through_norm = r * (g * to_float(wv.v[k]) - n * mean_dot);
        if constexpr (!std::is_same_v<G, T>) through_norm = rounded_to<T>(through_norm);
        out.v[k] = from_float<G>(kAdd ? through_norm + to_float(direct.v[k]) : through_norm);
        if constexpr (kAmax) amax = abs_max(amax, to_float(out.v[k]));
        weight_sums[k * packs + p] += g * rounded_to<T>(n);
      }
      store_pack<G, N>(gx_row + p * N, out);
    }
  };

  // Two of the block's rows at a time (row and row + gridDim.x): both rows' loads are in flight
  // before the block waits on its reduction (one row at a time moved 2.8 TB/s at 135m, under 60%
  // of the bandwidth). The weight-gradient sums still take the rows in order: the same bits.
  for (int64_t row = blockIdx.x; row < rows; row += 2 * static_cast<int64_t>(gridDim.x)) {
    const int64_t second = row + gridDim.x;
    const bool two = second < rows;
    const float r0 = rstd[row], r1 = two ? rstd[second] : 0.f;
    float dot0 = 0.f, dot1 = 0.f;  // sums over each row of (grad_y * weight) * normalised x
    auto add_pack = [](float& dot, const Pack<T, N>& gv, const Pack<T, N>& xv, const Pack<T, N>& wv, float r) {
#pragma unroll
      for (int k = 0; k < N; ++k) dot += to_float(gv.v[k]) * to_float(wv.v[k]) * (to_float(xv.v[k]) * r);
    };
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T, N> wv = load_pack<T, N>(weight + p * N);
      const Pack<T, N> g0 = load_pack<T, N>(grad_y + row * hidden + p * N);
      const Pack<T, N> x0 = load_pack<T, N>(x + row * hidden + p * N);
      Pack<T, N> g1, x1;
      if (two) {
        g1 = load_pack<T, N>(grad_y + second * hidden + p * N);
        x1 = load_pack<T, N>(x + second * hidden + p * N);
      }
      add_pack(dot0, g0, x0, wv, r0);
      if (two) add_pack(dot1, g1, x1, wv, r1);
    }
    const float mean0 = block_reduce(dot0, scratch, SumOp{}, 0.f) / static_cast<float>(hidden);
    const float mean1 = two ? block_reduce(dot1, scratch, SumOp{}, 0.f) / static_cast<float>(hidden) : 0.f;
    finish_row(row, r0, mean0);
    if (two) finish_row(second, r1, mean1);
  }

  if constexpr (kAmax) fold_block_amax(amax, scratch, amax_slots);
  float* partial = weight_partials + static_cast<int64_t>(blockIdx.x) * hidden;  // in the row's order
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x)
#pragma unroll
    for (int k = 0; k < N; ++k) partial[p * N + k] = weight_sums[k * packs + p];
}

// grad_weight[c] = the sum of the partial rows' column c, in one fixed order: kRowGroups
// threads per column each take every kRowGroups-th row (a warp reads 32 consecutive columns of
// one row), then one thread adds the groups' sums. One launch, rounded once into the weight's
// dtype (LibTorch's column sum and cast were two launches per norm).
constexpr int kColumns = 32;
constexpr int kRowGroups = 16;

template <typename T>
__global__ void sum_weight_partials_kernel(const float* __restrict__ partials, int64_t count, int64_t hidden,
                                           T* __restrict__ grad_weight) {
  __shared__ float group_sums[kRowGroups][kColumns + 1];
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  float sum = 0.f;
  if (column < hidden)
    for (int64_t r = threadIdx.y; r < count; r += kRowGroups) sum += partials[r * hidden + column];
  group_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || column >= hidden) return;
  float total = 0.f;
#pragma unroll
  for (int g = 0; g < kRowGroups; ++g) total += group_sums[g][threadIdx.x];
  grad_weight[column] = from_float<T>(total);
}

// Whether `p` starts a vector of N elements of S: 16 bytes when S is T, 32 for an fp32 sum of
// 16-bit rows (two vector accesses).
template <typename S, int N>
bool pack_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (sizeof(S) * N) == 0;
}

// The forward's launch for the element type T, x of type X, the residual and the sum of type S.
template <typename T, typename X, typename S>
cudaError_t launch_rms_norm_forward(const void* x, const void* residual, const void* weight, void* y, void* sum,
                                    float* rstd, float* amax_slots, int64_t rows, int64_t hidden, float eps,
                                    cudaStream_t stream) {
  const unsigned grid = grid_for(rows, 1, int64_t{1} << 30);
  auto launch = [&](auto kernel, int threads) {
    kernel<<<grid, threads, 0, stream>>>(static_cast<const X*>(x), static_cast<const S*>(residual),
                                         static_cast<const T*>(weight), static_cast<T*>(y), static_cast<S*>(sum), rstd,
                                         amax_slots, rows, hidden, eps);
    return cudaGetLastError();
  };
  // The kernel for N elements a vector, with or without the residual add and the amax.
  auto launch_width = [&](auto width, int threads) {
    constexpr int W = decltype(width)::value;
    return dispatch_switches(residual != nullptr, amax_slots != nullptr, [&](auto add, auto amax) {
      // The add reads x in the norm's dtype: not instantiated for an fp32 x (whose launcher passes no residual).
      constexpr bool kAdd = std::is_same_v<X, T> && decltype(add)::value;
      return launch(rms_norm_forward_kernel<T, X, S, W, kAdd, decltype(amax)::value>, threads);
    });
  };
  constexpr int N = kVectorWidth<T>;
  if (vectorizable<T>(hidden, {weight, y}) && pack_aligned<X, N>(x) &&
      (residual == nullptr || pack_aligned<S, N>(residual)) && (sum == nullptr || pack_aligned<S, N>(sum)))
    return launch_width(std::integral_constant<int, N>(), row_threads(hidden / N, kMaxThreads));
  return launch_width(std::integral_constant<int, 1>(), row_threads(hidden, kMaxThreads));
}

// The backward's launch for the element type T, grad_sum and grad_x of type G.
template <typename T, typename G>
cudaError_t launch_rms_norm_backward(const void* grad_y, const void* x, const void* weight, const float* rstd,
                                     const void* grad_sum, void* grad_x, float* weight_partials, void* grad_weight,
                                     float* amax_slots, int64_t rows, int64_t hidden, cudaStream_t stream) {
  // One block per row of partials: the caller sized weight_partials by rms_norm_weight_partials.
  const unsigned grid = static_cast<unsigned>(rms_norm_weight_partials(rows));
  const size_t shared_bytes = static_cast<size_t>(hidden) * sizeof(float);
  auto launch = [&](auto kernel, int threads) {
    // Beyond 48 KiB of dynamic shared memory (hidden > 12288) the kernel must opt in.
    if (const cudaError_t status = allow_dynamic_shared_memory(kernel, shared_bytes); status != cudaSuccess)
      return status;
    kernel<<<grid, threads, shared_bytes, stream>>>(
        static_cast<const T*>(grad_y), static_cast<const T*>(x), static_cast<const T*>(weight), rstd,
        static_cast<const G*>(grad_sum), static_cast<G*>(grad_x), weight_partials, amax_slots, rows, hidden);
    if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
    sum_weight_partials_kernel<T>
        <<<static_cast<unsigned>((hidden + kColumns - 1) / kColumns), dim3(kColumns, kRowGroups), 0, stream>>>(
            weight_partials, grid, hidden, static_cast<T*>(grad_weight));
    return cudaGetLastError();
  };
  // The kernel for N elements a vector, with or without the direct gradient and the amax.
  auto launch_width = [&](auto width, int threads) {
    return dispatch_switches(grad_sum != nullptr, amax_slots != nullptr, [&](auto add, auto amax) {
      return launch(rms_norm_backward_kernel<T, G, decltype(width)::value, add.value, amax.value>, threads);
    });
  };
  constexpr int N = kVectorWidth<T>;
  if (vectorizable<T>(hidden, {grad_y, x, weight}) && pack_aligned<G, N>(grad_x) &&
      (grad_sum == nullptr || pack_aligned<G, N>(grad_sum)))
    return launch_width(std::integral_constant<int, N>(), row_threads(hidden / N, kMaxThreads));
  return launch_width(std::integral_constant<int, 1>(), row_threads(hidden, kMaxThreads));
}

}  // namespace

int64_t rms_norm_weight_partials(int64_t rows) { return std::min(rows, kBackwardBlocks); }

cudaError_t rms_norm_forward(Dtype dtype, const void* x, const void* residual, const void* weight, void* y, void* sum,
                             float* rstd, float* amax_slots, int64_t rows, int64_t hidden, float eps,
                             cudaStream_t stream) {
  if (rows == 0 || hidden == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_rms_norm_forward<T, T, T>(x, residual, weight, y, sum, rstd, amax_slots, rows, hidden, eps, stream);
  });
}

cudaError_t add_rms_norm_forward_fp32_sum(Dtype dtype, const void* x, const float* residual, const void* weight,
                                          void* y, float* sum, float* rstd, int64_t rows, int64_t hidden, float eps,
                                          cudaStream_t stream) {
  if (rows == 0 || hidden == 0) return cudaSuccess;
  if (residual == nullptr || sum == nullptr) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_rms_norm_forward<T, T, float>(x, residual, weight, y, sum, rstd, nullptr, rows, hidden, eps, stream);
  });
}

cudaError_t rms_norm_forward_fp32_input(Dtype dtype, const float* x, const void* weight, void* y, void* x_rounded,
                                        float* rstd, int64_t rows, int64_t hidden, float eps, cudaStream_t stream) {
  if (rows == 0 || hidden == 0) return cudaSuccess;
  if (x_rounded == nullptr) return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {  // x is of dtype already: the kernel writes no row
      if (x_rounded != x)
        if (const cudaError_t status =
                cudaMemcpyAsync(x_rounded, x, rows * hidden * sizeof(float), cudaMemcpyDeviceToDevice, stream);
            status != cudaSuccess)
          return status;
    }
    return launch_rms_norm_forward<T, float, T>(x, nullptr, weight, y, x_rounded, rstd, nullptr, rows, hidden, eps,
                                                stream);
  });
}

cudaError_t rms_norm_backward(Dtype dtype, const void* grad_y, const void* x, const void* weight, const float* rstd,
                              const void* grad_sum, void* grad_x, float* weight_partials, void* grad_weight,
                              float* amax_slots, int64_t rows, int64_t hidden, cudaStream_t stream) {
  if (rows == 0 || hidden == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_rms_norm_backward<T, T>(grad_y, x, weight, rstd, grad_sum, grad_x, weight_partials, grad_weight,
                                          amax_slots, rows, hidden, stream);
  });
}

cudaError_t rms_norm_backward_fp32_input(Dtype dtype, const void* grad_y, const void* x, const void* weight,
                                         const float* rstd, const float* grad_sum, float* grad_x,
                                         float* weight_partials, void* grad_weight, int64_t rows, int64_t hidden,
                                         cudaStream_t stream) {
  if (rows == 0 || hidden == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_rms_norm_backward<T, float>(grad_y, x, weight, rstd, grad_sum, grad_x, weight_partials, grad_weight,
                                              nullptr, rows, hidden, stream);
  });
}

}  // namespace triax::kernels
