// The SSD backward's elementwise passes (ssd_backward_kernels.hpp). Each warp takes one (position,
// head) at a time, grid-stride: its lanes walk the head's p channels (coalesced: consecutive lanes,
// consecutive channels; up to four a lane loaded before any is used), write the scaled product and
// sum the dot product lane by lane, then a butterfly across the warp; lane 0 writes the (position,
// head)'s term. The scaled products are rounded once, as LibTorch's product stored in the output
// type is.
#include "ssd_backward_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using triax::kernels::from_float;
using triax::kernels::SumOp;
using triax::kernels::to_float;
using triax::kernels::warp_reduce;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Calls f(pair) for this warp's pairs among `pairs` (at most kMaxTermsPairs: a pair's index and its
// decomposition in int32, as int64 division, done for every pair by the whole warp, would cost
// more than its loads). Every lane of a warp takes the same ones (the warp's reductions need all 32).
template <typename F>
__device__ __forceinline__ void for_each_pair(int pairs, F&& f) {
  const int warp = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / 32);
  const int warps = static_cast<int>(gridDim.x * blockDim.x / 32);
  for (int pair = warp; pair < pairs; pair += warps) f(pair);
}

// The sizes below the pair count, as int32 (they divide it).
struct Dims {
  int groups, chunks, heads, positions, length;
};

Dims dims_of(const TermsShape& s) {
  return {static_cast<int>(s.groups), static_cast<int>(s.chunks), static_cast<int>(s.heads),
          static_cast<int>(s.positions), static_cast<int>(s.length)};
}

// The pairs of the chunks' layout [b, c, g, q, r]: pair (block, i, h) with block = (b c g); the
// factors' offset in [b, c, g, r, q].
struct ChunkPair {
  int block, position, head, factor;
};

__device__ __forceinline__ ChunkPair chunk_pair(int pair, const Dims& d) {
  const int head = pair % d.heads, row = pair / d.heads;
  const int position = row % d.positions, block = row / d.positions;
  return {block, position, head, (block * d.heads + head) * d.positions + position};
}

// The offset of (block, position, head)'s channels in an operand at `strides`.
__device__ __forceinline__ int64_t chunked_offset(const ChunkedStrides& strides, const Dims& d, int block, int position,
                                                  int head) {
  const int group = block % d.groups, chunk = (block / d.groups) % d.chunks, batch = block / (d.groups * d.chunks);
  return batch * strides.batch + chunk * strides.chunk + group * strides.group + position * strides.position +
         head * strides.head;
}

int64_t chunk_pairs(const TermsShape& s) { return s.batch * s.chunks * s.groups * s.positions * s.heads; }

// Channels a lane loads before it uses any: head_dim up to 32 kSteps in one round.
constexpr int kSteps = 4;

// Walks a head's head_dim channels, the lane taking lane, lane + 32, ...: per round, load(e, a, b,
// c) for each of its channels (the round's loads issued together), then write(e, a, c); returns
// the warp's sum of a b over the channels (each lane's in channel order, then the butterfly).
template <typename Load, typename Write>
__device__ __forceinline__ float walk_channels(int head_dim, int lane, Load&& load, Write&& write) {
  float dot = 0.f;
  for (int base = 0; base < head_dim; base += 32 * kSteps) {
    float a[kSteps], b[kSteps], c[kSteps];
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int e = base + lane + 32 * k;
      a[k] = b[k] = c[k] = 0.f;
      if (e < head_dim) load(e, a[k], b[k], c[k]);
    }
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int e = base + lane + 32 * k;
      if (e < head_dim) {
        write(e, a[k], c[k]);
        dot += a[k] * b[k];
      }
    }
  }
  return warp_reduce(dot, SumOp{});
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    chunk_states_terms_kernel(const float* __restrict__ dweighted, const T* __restrict__ xdt,
                              const float* __restrict__ to_end, float* __restrict__ d_xdt, ChunkedStrides d_xdt_strides,
                              float* __restrict__ dw, Dims dims, int head_dim, int pairs) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for_each_pair(pairs, [&](int pair) {
    const ChunkPair at = chunk_pair(pair, dims);
    float* d_head = d_xdt + chunked_offset(d_xdt_strides, dims, at.block, at.position, at.head);
    const float w = to_end[at.factor];
    const int64_t values = static_cast<int64_t>(pair) * head_dim;
    const float dot = walk_channels(
        head_dim, lane,
        [&](int e, float& g, float& x, float& sum) {
          g = dweighted[values + e], x = to_float(xdt[values + e]), sum = d_head[e];
        },
        [&](int e, float g, float sum) { d_head[e] = sum + g * w; });
    if (lane == 0) dw[at.factor] = dot * w;
  });
}

template <typename D, typename T>
__global__ void __launch_bounds__(kThreads)
    read_out_terms_kernel(const D* __restrict__ dy, ChunkedStrides dy_strides, const float* __restrict__ from_start,
                          const float* __restrict__ read, T* __restrict__ dread, float* __restrict__ d_decay, Dims dims,
                          int head_dim, int pairs) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for_each_pair(pairs, [&](int pair) {
    const ChunkPair at = chunk_pair(pair, dims);
    const D* dy_head = dy + chunked_offset(dy_strides, dims, at.block, at.position, at.head);
    const float f = from_start[at.factor];
    const int64_t values = static_cast<int64_t>(pair) * head_dim;
    const float dot = walk_channels(
        head_dim, lane, [&](int e, float& g, float& r, float&) { g = to_float(dy_head[e]), r = read[values + e]; },
        [&](int e, float g, float) { dread[values + e] = from_float<T>(g * f); });
    if (lane == 0) d_decay[at.factor] = dot * f;
  });
}

// Pairs (b, t, H) of the inputs' layout [b, l, H] below the length.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    input_terms_kernel(const float* __restrict__ d_xdt, ChunkedStrides d_xdt_strides, const T* __restrict__ x,
                       InputStrides x_strides, const float* __restrict__ dt, T* __restrict__ dx,
                       float* __restrict__ d_dt, Dims dims, int head_dim, int pairs) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int heads = dims.groups * dims.heads;
  for_each_pair(pairs, [&](int pair) {
    const int head = pair % heads, t = (pair / heads) % dims.length, batch = pair / (heads * dims.length);
    const int block = (batch * dims.chunks + t / dims.positions) * dims.groups + head / dims.heads;
    const float* d_head = d_xdt + chunked_offset(d_xdt_strides, dims, block, t % dims.positions, head % dims.heads);
    const T* x_head = x + batch * x_strides.batch + t * x_strides.position + head * x_strides.head;
    const float f = dt[pair];
    const int64_t values = static_cast<int64_t>(pair) * head_dim;
    const float dot = walk_channels(
        head_dim, lane, [&](int e, float& g, float& v, float&) { g = d_head[e], v = to_float(x_head[e]); },
        [&](int e, float g, float) { dx[values + e] = from_float<T>(g * f); });
    if (lane == 0) d_dt[pair] = dot;
  });
}

unsigned blocks_for(int64_t pairs) { return triax::kernels::grid_for(pairs, kWarps, int64_t{1} << 20); }

}  // namespace

cudaError_t chunk_states_terms(triax::kernels::Dtype operand, const float* dweighted, const void* xdt,
                               const float* to_end, float* d_xdt, const ChunkedStrides& d_xdt_strides, float* dw,
                               const TermsShape& shape, cudaStream_t stream) {
  const int64_t pairs = chunk_pairs(shape);
  if (pairs == 0) return cudaSuccess;
  if (pairs > kMaxTermsPairs) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(operand, [&](auto tag) {
    using T = typename decltype(tag)::type;
    chunk_states_terms_kernel<T><<<blocks_for(pairs), kThreads, 0, stream>>>(
        dweighted, static_cast<const T*>(xdt), to_end, d_xdt, d_xdt_strides, dw, dims_of(shape),
        static_cast<int>(shape.head_dim), static_cast<int>(pairs));
    return cudaGetLastError();
  });
}

cudaError_t read_out_terms(triax::kernels::Dtype dy_type, triax::kernels::Dtype operand, const void* dy,
                           const ChunkedStrides& dy_strides, const float* from_start, const float* read, void* dread,
                           float* d_decay, const TermsShape& shape, cudaStream_t stream) {
  const int64_t pairs = chunk_pairs(shape);
  if (pairs == 0) return cudaSuccess;
  if (pairs > kMaxTermsPairs) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(dy_type, [&](auto dy_tag) {
    using D = typename decltype(dy_tag)::type;
    return triax::kernels::dispatch_dtype(operand, [&](auto tag) {
      using T = typename decltype(tag)::type;
      read_out_terms_kernel<D, T><<<blocks_for(pairs), kThreads, 0, stream>>>(
          static_cast<const D*>(dy), dy_strides, from_start, read, static_cast<T*>(dread), d_decay, dims_of(shape),
          static_cast<int>(shape.head_dim), static_cast<int>(pairs));
      return cudaGetLastError();
    });
  });
}

cudaError_t input_terms(triax::kernels::Dtype x_type, const float* d_xdt, const ChunkedStrides& d_xdt_strides,
                        const void* x, const InputStrides& x_strides, const float* dt, void* dx, float* d_dt,
                        const TermsShape& shape, cudaStream_t stream) {
  const int64_t pairs = shape.batch * shape.length * shape.groups * shape.heads;
  if (pairs == 0) return cudaSuccess;
  if (pairs > kMaxTermsPairs) return cudaErrorInvalidValue;
  return triax::kernels::dispatch_dtype(x_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    input_terms_kernel<T><<<blocks_for(pairs), kThreads, 0, stream>>>(
        d_xdt, d_xdt_strides, static_cast<const T*>(x), x_strides, dt, static_cast<T*>(dx), d_dt, dims_of(shape),
        static_cast<int>(shape.head_dim), static_cast<int>(pairs));
    return cudaGetLastError();
  });
}

}  // namespace triax::mamba2::kernels
