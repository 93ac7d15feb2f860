// The SSD backward's elementwise passes (ssd_backward_kernels.hpp). A group of lanes takes one
// (position, head) at a time, grid-stride: it walks the head's p channels, writes the scaled
// product and sums the dot product lane by lane, then a butterfly across the group; the group's
// first lane writes the (position, head)'s term. Packed path (unless TRIAX_MAMBA2_SSD_TERMS_VECTOR=0;
// where p / 8 is a power of two up to 32 and every channel run is 16-byte aligned):
// p / 8 lanes a pair, 8 consecutive channels a lane in 16-byte loads, all issued before any use,
// so that the passes run at the copy bandwidth. Else a warp a pair, a lane's channels 32 apart
// (coalesced scalar loads, up to four a lane issued together). Either way each run gives the same
// bits (a fixed order). The scaled products are rounded once, as LibTorch's product stored in the
// output type is.
#include <type_traits>

#include "ssd_backward_kernels.hpp"
#include "triax/environment_switch.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using triax::kernels::from_float;
using triax::kernels::load_floats;
using triax::kernels::store_floats;
using triax::kernels::to_float;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// A (position, head) pair's lanes: `lanes` consecutive lanes of a warp (a power of two, at most 32),
// 32 / lanes pairs a warp. Calls f(pair, active) for the pairs below `pairs` of this thread's lane
// group (at most kMaxTermsPairs: a pair's index and its decomposition in int32, as int64
// division, done for every pair, would cost more than its loads). Every lane of a warp makes the
// same calls, `active` false past the last pair: the groups' reductions need all 32.
template <typename F>
__device__ __forceinline__ void for_each_pair(int pairs, int lanes, F&& f) {
  const int per_warp = 32 / lanes, lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / 32);
  const int warps = static_cast<int>(gridDim.x * blockDim.x / 32);
  for (int first = warp * per_warp; first < pairs; first += warps * per_warp) {
    const int pair = first + lane / lanes;
    f(pair, pair < pairs);
  }
}

// The sum of v over the thread's group of `lanes` lanes (a butterfly: with 32 lanes, warp_reduce's
// order), in every lane of the group.
__device__ __forceinline__ float group_sum(float v, int lanes) {
  for (int offset = lanes / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
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

// Channels a lane loads before it uses any on the warp-per-pair path: head_dim up to 32 kSteps in
// one round.
constexpr int kSteps = 4;
// Channels a lane takes on the packed path: one 16-byte load of a 2-byte type, two of fp32.
constexpr int kPack = 8;

// One pair's head_dim channels of operands a and b (and c, when not null): out[e] = combine(a[e],
// c[e]) stored in Out; returns the group's sum of a b over the channels, in every lane. Packed:
// lanes = head_dim / kPack, the lane's kPack consecutive channels in 16-byte vectors (its sum in
// channel order, then the butterfly). Else lanes = 32, the lane taking channels lane, lane + 32, ...
// (per round its loads issued together; its sum in channel order, then the butterfly). All loads
// precede the writes: c may be out.
template <bool Packed, typename A, typename B, typename Out, typename Combine>
__device__ __forceinline__ float walk_channels(int head_dim, int lanes, bool active, const A* a, const B* b,
                                               const float* c, Out* out, Combine&& combine) {
  const int sub = static_cast<int>(threadIdx.x % 32) & (lanes - 1);
  float dot = 0.f;
  if (active) {
    if constexpr (Packed) {
      const int e = sub * kPack;
      float va[kPack], vb[kPack], vc[kPack] = {}, result[kPack];
      load_floats<A, kPack>(a + e, va);
      load_floats<B, kPack>(b + e, vb);
      if (c) load_floats<float, kPack>(c + e, vc);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        result[k] = combine(va[k], vc[k]);
        dot += va[k] * vb[k];
      }
      store_floats<Out, kPack>(out + e, result);
    } else {
      for (int base = 0; base < head_dim; base += 32 * kSteps) {
        float va[kSteps], vb[kSteps], vc[kSteps];
#pragma unroll
        for (int k = 0; k < kSteps; ++k) {
          const int e = base + sub + 32 * k;
          va[k] = vb[k] = vc[k] = 0.f;
          if (e < head_dim) va[k] = to_float(a[e]), vb[k] = to_float(b[e]), vc[k] = c ? c[e] : 0.f;
        }
#pragma unroll
        for (int k = 0; k < kSteps; ++k) {
          const int e = base + sub + 32 * k;
          if (e < head_dim) {
            out[e] = from_float<Out>(combine(va[k], vc[k]));
            dot += va[k] * vb[k];
          }
        }
      }
    }
  }
  return group_sum(dot, lanes);
}

__device__ __forceinline__ bool group_leader(int lanes) { return (threadIdx.x % 32) % lanes == 0; }

template <bool Packed, typename T>
__global__ void __launch_bounds__(kThreads)
    chunk_states_terms_kernel(const float* __restrict__ dweighted, const T* __restrict__ xdt,
                              const float* __restrict__ to_end, float* d_xdt, ChunkedStrides d_xdt_strides,
                              float* __restrict__ dw, Dims dims, int head_dim, int pair_lanes, int pairs) {
  const int lanes = Packed ? pair_lanes : 32;  // a constant on the warp-per-pair path
  for_each_pair(pairs, lanes, [&](int pair, bool active) {
    const ChunkPair at = chunk_pair(pair, dims);
    float* d_head = d_xdt + chunked_offset(d_xdt_strides, dims, at.block, at.position, at.head);
    const float w = active ? to_end[at.factor] : 0.f;
    const int64_t values = static_cast<int64_t>(pair) * head_dim;
    const float dot = walk_channels<Packed>(head_dim, lanes, active, dweighted + values, xdt + values, d_head, d_head,
                                            [w](float g, float sum) { return sum + g * w; });
    if (active && group_leader(lanes)) dw[at.factor] = dot * w;
  });
}

template <bool Packed, typename D, typename T>
__global__ void __launch_bounds__(kThreads)
    read_out_terms_kernel(const D* __restrict__ dy, ChunkedStrides dy_strides, const float* __restrict__ from_start,
                          const float* __restrict__ read, T* __restrict__ dread, float* __restrict__ d_decay, Dims dims,
                          int head_dim, int pair_lanes, int pairs) {
  const int lanes = Packed ? pair_lanes : 32;  // a constant on the warp-per-pair path
  for_each_pair(pairs, lanes, [&](int pair, bool active) {
    const ChunkPair at = chunk_pair(pair, dims);
    const D* dy_head = dy + chunked_offset(dy_strides, dims, at.block, at.position, at.head);
    const float f = active ? from_start[at.factor] : 0.f;
    const int64_t values = static_cast<int64_t>(pair) * head_dim;
    const float dot = walk_channels<Packed>(head_dim, lanes, active, dy_head, read + values, nullptr, dread + values,
                                            [f](float g, float) { return g * f; });
    if (active && group_leader(lanes)) d_decay[at.factor] = dot * f;
  });
}

// Pairs (b, t, H) of the inputs' layout [b, l, H] below the length.
template <bool Packed, typename T>
__global__ void __launch_bounds__(kThreads)
    input_terms_kernel(const float* __restrict__ d_xdt, ChunkedStrides d_xdt_strides, const T* __restrict__ x,
                       InputStrides x_strides, const float* __restrict__ dt, T* __restrict__ dx,
                       float* __restrict__ d_dt, Dims dims, int head_dim, int pair_lanes, int pairs) {
  const int lanes = Packed ? pair_lanes : 32;  // a constant on the warp-per-pair path
  const int heads = dims.groups * dims.heads;
  for_each_pair(pairs, lanes, [&](int pair, bool active) {
    const int head = pair % heads, t = (pair / heads) % dims.length, batch = pair / (heads * dims.length);
    const int block = (batch * dims.chunks + t / dims.positions) * dims.groups + head / dims.heads;
    const float* d_head = d_xdt + chunked_offset(d_xdt_strides, dims, block, t % dims.positions, head % dims.heads);
    const T* x_head = x + batch * x_strides.batch + t * x_strides.position + head * x_strides.head;
    const float f = active ? dt[pair] : 0.f;
    const int64_t values = static_cast<int64_t>(pair) * head_dim;
    const float dot = walk_channels<Packed>(head_dim, lanes, active, d_head, x_head, nullptr, dx + values,
                                            [f](float g, float) { return g * f; });
    if (active && group_leader(lanes)) d_dt[pair] = dot;
  });
}

// The lanes a pair takes on the packed path: head_dim / kPack when that is a power of two up to 32
// unless TRIAX_MAMBA2_SSD_TERMS_VECTOR=0; else 0 (the warp-per-pair path). The caller checks
// the operands' alignment (packed_operand).
int packed_lanes(int64_t head_dim) {
  if (!switched_on_unless_zero("TRIAX_MAMBA2_SSD_TERMS_VECTOR") || head_dim % kPack != 0) return 0;
  const int64_t lanes = head_dim / kPack;
  return lanes <= 32 && (lanes & (lanes - 1)) == 0 ? static_cast<int>(lanes) : 0;
}

// True when every channel run of an operand at `strides` (elements of `bytes` each) starts 16-byte
// aligned: its base pointer is, and so are its strides.
bool packed_operand(const void* base, size_t bytes, std::initializer_list<int64_t> strides) {
  if (!triax::kernels::aligned16(base)) return false;
  for (int64_t s : strides)
    if ((s * static_cast<int64_t>(bytes)) % 16 != 0) return false;
  return true;
}

bool packed_operand(const void* base, size_t bytes, const ChunkedStrides& s) {
  return packed_operand(base, bytes, {s.batch, s.chunk, s.group, s.position, s.head});
}

// A contiguous [.., p] operand: head_dim is a multiple of kPack on the packed path.
bool packed_operand(const void* base) { return triax::kernels::aligned16(base); }

size_t dtype_bytes(triax::kernels::Dtype t) { return t == triax::kernels::Dtype::Float32 ? 4 : 2; }

// Launches kernel<Packed> with `lanes` (packed) or 32 lanes a pair.
template <typename Launch>
cudaError_t launch_terms(int lanes, Launch&& launch) {
  return lanes > 0 ? launch(std::true_type{}, lanes) : launch(std::false_type{}, 32);
}

// Blocks for `pairs` at `lanes` a pair: kWarps * 32 / lanes pairs a block.
unsigned blocks_for(int64_t pairs, int lanes) {
  return triax::kernels::grid_for(pairs, kWarps * (32 / lanes), int64_t{1} << 20);
}

}  // namespace

cudaError_t chunk_states_terms(triax::kernels::Dtype operand, const float* dweighted, const void* xdt,
                               const float* to_end, float* d_xdt, const ChunkedStrides& d_xdt_strides, float* dw,
                               const TermsShape& shape, cudaStream_t stream) {
  const int64_t pairs = chunk_pairs(shape);
  if (pairs == 0) return cudaSuccess;
  if (pairs > kMaxTermsPairs) return cudaErrorInvalidValue;
  const bool aligned =
      packed_operand(dweighted) && packed_operand(xdt) && packed_operand(d_xdt, sizeof(float), d_xdt_strides);
  return triax::kernels::dispatch_dtype(operand, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_terms(aligned ? packed_lanes(shape.head_dim) : 0, [&](auto packed, int lanes) {
      chunk_states_terms_kernel<decltype(packed)::value, T><<<blocks_for(pairs, lanes), kThreads, 0, stream>>>(
          dweighted, static_cast<const T*>(xdt), to_end, d_xdt, d_xdt_strides, dw, dims_of(shape),
          static_cast<int>(shape.head_dim), lanes, static_cast<int>(pairs));
      return cudaGetLastError();
    });
  });
}

cudaError_t read_out_terms(triax::kernels::Dtype dy_type, triax::kernels::Dtype operand, const void* dy,
                           const ChunkedStrides& dy_strides, const float* from_start, const float* read, void* dread,
                           float* d_decay, const TermsShape& shape, cudaStream_t stream) {
  const int64_t pairs = chunk_pairs(shape);
  if (pairs == 0) return cudaSuccess;
  if (pairs > kMaxTermsPairs) return cudaErrorInvalidValue;
  const bool aligned =
      packed_operand(dy, dtype_bytes(dy_type), dy_strides) && packed_operand(read) && packed_operand(dread);
  return triax::kernels::dispatch_dtype(dy_type, [&](auto dy_tag) {
    using D = typename decltype(dy_tag)::type;
    return triax::kernels::dispatch_dtype(operand, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return launch_terms(aligned ? packed_lanes(shape.head_dim) : 0, [&](auto packed, int lanes) {
        read_out_terms_kernel<decltype(packed)::value, D, T><<<blocks_for(pairs, lanes), kThreads, 0, stream>>>(
            static_cast<const D*>(dy), dy_strides, from_start, read, static_cast<T*>(dread), d_decay, dims_of(shape),
            static_cast<int>(shape.head_dim), lanes, static_cast<int>(pairs));
        return cudaGetLastError();
      });
    });
  });
}

cudaError_t input_terms(triax::kernels::Dtype x_type, const float* d_xdt, const ChunkedStrides& d_xdt_strides,
                        const void* x, const InputStrides& x_strides, const float* dt, void* dx, float* d_dt,
                        const TermsShape& shape, cudaStream_t stream) {
  const int64_t pairs = shape.batch * shape.length * shape.groups * shape.heads;
  if (pairs == 0) return cudaSuccess;
  if (pairs > kMaxTermsPairs) return cudaErrorInvalidValue;
  const bool aligned = packed_operand(d_xdt, sizeof(float), d_xdt_strides) &&
                       packed_operand(x, dtype_bytes(x_type), {x_strides.batch, x_strides.position, x_strides.head}) &&
                       packed_operand(dx);
  return triax::kernels::dispatch_dtype(x_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_terms(aligned ? packed_lanes(shape.head_dim) : 0, [&](auto packed, int lanes) {
      input_terms_kernel<decltype(packed)::value, T><<<blocks_for(pairs, lanes), kThreads, 0, stream>>>(
          d_xdt, d_xdt_strides, static_cast<const T*>(x), x_strides, dt, static_cast<T*>(dx), d_dt, dims_of(shape),
          static_cast<int>(shape.head_dim), lanes, static_cast<int>(pairs));
      return cudaGetLastError();
    });
  });
}

}  // namespace triax::mamba2::kernels
