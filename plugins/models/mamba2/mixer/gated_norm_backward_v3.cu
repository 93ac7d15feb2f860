// The gated norm's third backward (gated_norm_kernels.hpp; TRIAX_MAMBA2_GATED_NORM_KERNEL=v3, with
// v2's forward). v2's plan (gated_norm_v2.cu: a block per group's row, blocks walking rows, each
// thread's channels and their weight's and D's sums in registers) reshaped for the copy bandwidth.
// At the 780m row (3072 bf16 channels) v2's backward gives 192 threads two vectors each at about
// 160 registers: two blocks (12 warps) an SM, each waiting for its row's loads, then computing,
// then storing: 1.4-2 TB/s on an H100. Here:
//  - a thread owns one 16-byte vector of the group (up to kThreads threads) in at most 80
//    registers (its norm weights in shared memory), so two blocks of 384 threads (24 warps) share
//    an SM at that row;
//  - the next row's inputs are loaded, as stored, into a second set of registers before this row's
//    sum: they are in flight while the block reduces, computes and writes;
//  - an element's sigmoid is computed once (v2: before and after the row's sum), and the row's sum
//    takes one barrier (block_reduce: three);
//  - D's terms are summed over the vector in the thread (a vector lies in one head): the vector's
//    sum goes to its first channel's partial, zeros to the others' (the caller adds a head's).
// The same per-element math as v1 and v2 (gated_norm_operands.cuh); the row's sum and the weight's
// and D's partial sums are added in another order than v2's. Only where every operand is on whole
// 16-byte vectors and a group has at most kThreads of them (gated_norm_backward_v3_fits); elsewhere v2.
#include "gated_norm_launch.cuh"
#include "gated_norm_slots.cuh"

namespace triax::mamba2::kernels {
namespace {

using namespace triax::kernels;  // the SDK's device helpers (kernel_utils.cuh)

// Threads per block at most, one vector each: with __launch_bounds__, 80 registers a thread.
constexpr int kThreads = 768;

// A thread's vector of one row's inputs as they are stored (nothing computed from them, so that
// loading them waits for nothing), and the row's rstd.
template <int N, typename T, typename Y>
struct RowLoads {
  Pack<T, N> x, z, g;
  Pack<Y, N> y;
  float r;
};

template <int N, typename T, typename Y>
__device__ __forceinline__ RowLoads<N, T, Y> load_row(const Operands<T, Y>& o, const T* __restrict__ grad_out,
                                                      const float* __restrict__ rstd, int64_t row, int64_t group,
                                                      int first) {
  RowLoads<N, T, Y> l;
  l.r = rstd[row * o.groups + group];
  l.x = load_channels<true, N>(o.x + row * o.xs.row_stride + group * o.xs.group_stride + first, N);
  l.z = load_channels<true, N>(o.z + row * o.zs.row_stride + group * o.zs.group_stride + first, N);
  l.y = load_channels<true, N>(o.y + row * o.ys.row_stride + group * o.ys.group_stride + first, N);
  l.g = load_channels<true, N>(grad_out + (row * o.groups + group) * o.channels + first, N);
  return l;
}

// The sum of v over the block, given to every thread after one barrier (block_reduce takes three):
// each warp adds the warps' sums itself, in the same order (same bits everywhere). Rows alternate
// between two halves of `sums` [2][32], so a row's writes never meet the previous row's reads.
__device__ __forceinline__ float block_sum(float v, float (*sums)[32], unsigned row_parity) {
  const int lane = threadIdx.x % 32, warps = static_cast<int>(blockDim.x / 32);
  float* half = sums[row_parity];
  v = warp_reduce(v, SumOp{});
  if (lane == 0) half[threadIdx.x / 32] = v;
  __syncthreads();
  return warp_reduce(lane < warps ? half[lane] : 0.f, SumOp{});
}

// Channel i of the thread's vector, its gate's sigmoid, norm weight w and head's D given.
template <int N, typename T, typename Y>
__device__ __forceinline__ ElementBackward element(const RowLoads<N, T, Y>& l, int i, float sig, float w, float D) {
  return {to_float(l.y.v[i]) + D * to_float(l.x.v[i]), to_float(l.z.v[i]), sig, to_float(l.g.v[i]), w, l.r};
}

template <typename T, typename Y>
__global__ void __launch_bounds__(kThreads)
    gated_norm_backward_v3_kernel(Operands<T, Y> o, int64_t rows, const T* __restrict__ grad_out,
                                  const float* __restrict__ rstd, Y* __restrict__ grad_y, T* __restrict__ grad_x,
                                  T* __restrict__ grad_z, int64_t z_row_stride, int64_t z_group_stride,
                                  float* __restrict__ weight_partials, float* __restrict__ skip_partials) {
  constexpr int N = kVectorWidth<T>;
  __shared__ float warp_sums[2][32];
  // Each thread's norm weights (dynamic: weight_bytes), read back at every row: registers would
  // hold them for good, and the thread's 80 must hold two rows.
  extern __shared__ __align__(32) unsigned char dynamic_shared[];
  Pack<float, N>* weights = reinterpret_cast<Pack<float, N>*>(dynamic_shared);
  const int64_t group = blockIdx.y, width = o.groups * o.channels;
  // Threads past the group's vectors load its first one and only join the row's sums.
  const bool owns = static_cast<int64_t>(threadIdx.x) * N < o.channels;
  const int first = owns ? static_cast<int>(threadIdx.x) * N : 0;
  const float D = o.D[(group * o.channels + first) / o.head_dim];  // one head a vector
  weights[threadIdx.x] = load_pack<float, N>(o.weight + group * o.channels + first);
  float weight_sum[N] = {}, skip_sum = 0.f;
  // The grid has at most `rows` blocks a group: the first row exists.
  RowLoads<N, T, Y> next = load_row<N>(o, grad_out, rstd, blockIdx.x, group, first);
  unsigned visit = 0;  // the rows this block has summed: their parity picks the half of warp_sums
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x, ++visit) {
    const RowLoads<N, T, Y> now = next;
    const int64_t following = row + gridDim.x;  // the last row loads itself again rather than branch
    next = load_row<N>(o, grad_out, rstd, following < rows ? following : rows - 1, group, first);
    const Pack<float, N> w = weights[threadIdx.x];
    float sig[N];     // computed once, used before and after the row's sum
    float dot = 0.f;  // sum over the group of d(normed) * normed
#pragma unroll
    for (int i = 0; i < N; ++i) {
      sig[i] = gate_sigmoid(to_float(now.z.v[i]));
      dot += element(now, i, sig[i], w.v[i], D).dot_term();
    }
    const float mean_dot = block_sum(owns ? dot : 0.f, warp_sums, visit & 1u) / static_cast<float>(o.channels);
    if (!owns) continue;
    const Pack<float, N> w_again = weights[threadIdx.x];
    float dy[N], dx[N], dz[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const ElementGradients d = element_gradients(element(now, i, sig[i], w_again.v[i], D), mean_dot);
      dy[i] = d.ds;
      dx[i] = d.ds * D;
      dz[i] = d.dz;
      weight_sum[i] += d.weight_term;
      skip_sum += d.ds * to_float(now.x.v[i]);
    }
    const int64_t at = row * width + group * o.channels + first;
    store_channels<true>(grad_y + at, N, dy);
    store_channels<true>(grad_x + at, N, dx);
    store_channels<true>(grad_z + row * z_row_stride + group * z_group_stride + first, N, dz);
  }
  if (!owns) return;
  const int64_t at = blockIdx.x * width + group * o.channels + first;
  float head_terms[N] = {skip_sum};  // the vector's D terms at its first channel
  store_channels<true>(weight_partials + at, N, weight_sum);
  store_channels<true>(skip_partials + at, N, head_terms);
}

// ---- launch plan (host) -----------------------------------------------------------------------

int64_t vectors_of(const GatedNormInputs& in, const GatedNormShape& shape) {
  return (shape.channels + vector_width(in.dtype) - 1) / vector_width(in.dtype);
}

int threads_for(const GatedNormInputs& in, const GatedNormShape& shape) {
  return row_threads(vectors_of(in, shape), kThreads);
}

// The block's shared weights: one vector of fp32 weights a thread.
size_t weight_bytes(const GatedNormInputs& in, const GatedNormShape& shape) {
  return static_cast<size_t>(threads_for(in, shape)) * static_cast<size_t>(vector_width(in.dtype)) * sizeof(float);
}

}  // namespace

bool gated_norm_backward_v3_fits(const GatedNormInputs& in, const GatedNormShape& shape) {
  // The weights are read by 16-byte vectors too.
  if (vectors_of(in, shape) > kThreads || !aligned16(in.weight)) return false;
  bool fits = false;
  dispatch_gated_norm_types(in, [&](auto t_tag, auto y_tag) {
    fits = vectorized<typename decltype(t_tag)::type, typename decltype(y_tag)::type>(in, shape, {});
    return cudaSuccess;
  });
  return fits;
}

int64_t gated_norm_backward_v3_partial_rows(const GatedNormInputs& in, const GatedNormShape& shape) {
  int64_t blocks = 0;  // none without rows: the caller's sums over the partials are then zeros
  if (shape.rows == 0 || !gated_norm_backward_v3_fits(in, shape)) return blocks;
  dispatch_gated_norm_types(in, [&](auto t_tag, auto y_tag) {
    using T = typename decltype(t_tag)::type;
    using Y = typename decltype(y_tag)::type;
    blocks =
        blocks_per_group(gated_norm_backward_v3_kernel<T, Y>, threads_for(in, shape), shape, weight_bytes(in, shape));
    return cudaSuccess;
  });
  return blocks;
}

cudaError_t gated_norm_backward_v3(const GatedNormInputs& in, const GatedNormShape& shape, const void* grad_out,
                                   const float* rstd, const GatedNormGradients& grads, cudaStream_t stream) {
  if (shape.rows == 0 || shape.channels == 0) return cudaSuccess;
  if (!gated_norm_backward_v3_fits(in, shape)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(gated_norm_backward_v3_partial_rows(in, shape)),
                  static_cast<unsigned>(shape.groups));
  return dispatch_gated_norm_types(in, [&](auto t_tag, auto y_tag) {
    using T = typename decltype(t_tag)::type;
    using Y = typename decltype(y_tag)::type;
    if (!vectorized<T, Y>(in, shape,
                          {grad_out, grads.y, grads.x, grads.z, grads.weight_partials, grads.skip_partials}) ||
        grads.z_row_stride % kVectorWidth<T> != 0 || grads.z_group_stride % kVectorWidth<T> != 0)
      return cudaErrorMisalignedAddress;
    gated_norm_backward_v3_kernel<T, Y><<<grid, threads_for(in, shape), weight_bytes(in, shape), stream>>>(
        operands_of<T, Y>(in, shape), shape.rows, static_cast<const T*>(grad_out), rstd, static_cast<Y*>(grads.y),
        static_cast<T*>(grads.x), static_cast<T*>(grads.z), grads.z_row_stride, grads.z_group_stride,
        grads.weight_partials, grads.skip_partials);
    return cudaGetLastError();
  });
}

}  // namespace triax::mamba2::kernels
