// Rotary position embedding in the "rotate half" layout and its transpose (the backward pass),
// and the same walk copying the values (the fused projection's value heads and their gradient).
// A thread takes V consecutive pairs (i .. i+V-1 with their partners i + head_dim/2 ..) of one
// head vector: 16-byte loads and stores when head_dim/2, the strides and the pointers allow it,
// single elements otherwise. Head vectors are numbered heads fastest, then positions, so that
// attention's [batch, seq, heads, head_dim] storage (the operand may be that strided view of
// [batch, heads, seq, head_dim]; head_dim must be contiguous) is walked in memory order, as is
// the fused q/k/v projection's [batch, seq, kv_heads, group + 2, head_dim] (grouped heads). The
// index arithmetic is 32-bit when the work allows: 64-bit divisions cost more than the rotation
// (the earlier one-pair-per-thread kernel with 64-bit indices took 5x the memory-bound time).
// With amax slots (the backward and the copy only) each thread also keeps the largest |value| it
// stores, and the block folds it into the slots at its end (kernel_utils.cuh, fold_block_amax).
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kThreads = 256;

enum class Map { kForward, kInverse, kCopy };

// max(running, |v|) over a pack as stored.
template <typename T, int V>
__device__ __forceinline__ float pack_amax(float running, const Pack<T, V>& p) {
#pragma unroll
  for (int k = 0; k < V; ++k) running = abs_max(running, to_float(p.v[k]));
  return running;
}

template <typename T, int V, Map kMap, typename Index, bool kAmax = false>
__global__ void rotary_kernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                              T* __restrict__ out, RotaryLayout layout, Index work) {
  float amax = 0.0f;
  const Index heads = static_cast<Index>(layout.heads), seq = static_cast<Index>(layout.seq);
  const Index half = static_cast<Index>(layout.head_dim / 2), chunks = half / V;
  const Index group = static_cast<Index>(layout.group);
  for (Index index = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; index < work;
       index += static_cast<Index>(gridDim.x) * blockDim.x) {
    // index = ((b * seq + s) * heads + h) * chunks + chunk
    const Index chunk = index % chunks;
    Index rest = index / chunks;
    const Index h = rest % heads;
    rest /= heads;
    const Index s = rest % seq;
    const Index b = rest / seq;
    const Index i = chunk * V;
    // Grouped heads: block and member; the branch is uniform over the grid, and the division
    // runs only for grouped operands.
    Index block = h, member = 0;
    if (group > 1) {
      block = h / group;
      member = h - block * group;
    }
    const T* x_row = x + b * layout.in_stride[0] + block * layout.in_stride[1] + member * layout.in_member_stride +
                     s * layout.in_stride[2];
    const Index out_s = layout.out_rows == nullptr ? s : static_cast<Index>(layout.out_rows[b * seq + s]);
    T* out_row = out + b * layout.out_stride[0] + block * layout.out_stride[1] + member * layout.out_member_stride +
                 out_s * layout.out_stride[2];
    const Pack<T, V> x1 = load_pack<T, V>(x_row + i), x2 = load_pack<T, V>(x_row + i + half);
    if constexpr (kMap == Map::kCopy) {
      store_pack<T, V>(out_row + i, x1);
      store_pack<T, V>(out_row + i + half, x2);
      if constexpr (kAmax) amax = pack_amax(pack_amax(amax, x1), x2);
      continue;
    }
    Index row = s;
    if (layout.table_rows != nullptr)
      row = static_cast<Index>(min(layout.table_rows[b * seq + s], layout.table_length - 1));
    const T* cos_row = cos + row * static_cast<Index>(layout.head_dim);
    const T* sin_row = sin + row * static_cast<Index>(layout.head_dim);
    const Pack<T, V> c1 = load_pack<T, V>(cos_row + i), c2 = load_pack<T, V>(cos_row + i + half);
    const Pack<T, V> s1 = load_pack<T, V>(sin_row + i), s2 = load_pack<T, V>(sin_row + i + half);
    Pack<T, V> o1, o2;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float a = to_float(x1.v[k]), b2 = to_float(x2.v[k]);
      // Forward: [o1, o2] = [[c1, -s1], [s2, c2]] [a, b2]; inverse: the transposed matrix.
      constexpr bool kInverse = kMap == Map::kInverse;
      const float first =
          kInverse ? a * to_float(c1.v[k]) + b2 * to_float(s2.v[k]) : a * to_float(c1.v[k]) - b2 * to_float(s1.v[k]);
      const float second =
          kInverse ? b2 * to_float(c2.v[k]) - a * to_float(s1.v[k]) : b2 * to_float(c2.v[k]) + a * to_float(s2.v[k]);
      o1.v[k] = from_float<T>(first);
      o2.v[k] = from_float<T>(second);
    }
    store_pack<T, V>(out_row + i, o1);
    store_pack<T, V>(out_row + i + half, o2);
    if constexpr (kAmax) amax = pack_amax(pack_amax(amax, o1), o2);
  }
  if constexpr (kAmax) {
    __shared__ float scratch[33];
    fold_block_amax(amax, scratch, layout.amax_slots);
  }
}

template <typename T, int V, typename Index>
void launch(const T* x, const T* cos, const T* sin, T* out, const RotaryLayout& layout, Map map, int64_t work,
            cudaStream_t stream) {
  const unsigned grid = grid_for(work, kThreads);
  const Index n = static_cast<Index>(work);
  if (layout.amax_slots != nullptr) {  // the launcher allows them for the backward and the copy only
    if (map == Map::kInverse)
      rotary_kernel<T, V, Map::kInverse, Index, true><<<grid, kThreads, 0, stream>>>(x, cos, sin, out, layout, n);
    else
      rotary_kernel<T, V, Map::kCopy, Index, true><<<grid, kThreads, 0, stream>>>(x, cos, sin, out, layout, n);
    return;
  }
  switch (map) {
    case Map::kForward:
      rotary_kernel<T, V, Map::kForward, Index><<<grid, kThreads, 0, stream>>>(x, cos, sin, out, layout, n);
      break;
    case Map::kInverse:
      rotary_kernel<T, V, Map::kInverse, Index><<<grid, kThreads, 0, stream>>>(x, cos, sin, out, layout, n);
      break;
    case Map::kCopy:
      rotary_kernel<T, V, Map::kCopy, Index><<<grid, kThreads, 0, stream>>>(x, cos, sin, out, layout, n);
      break;
  }
}

// Whole 16-byte vectors of T: half a head vector of them, every row start aligned.
template <typename T>
bool rotary_vectorizable(const void* x, const void* cos, const void* sin, const void* out, const RotaryLayout& layout) {
  constexpr int64_t V = kVectorWidth<T>;
  if ((layout.head_dim / 2) % V != 0) return false;
  for (int d = 0; d < 3; ++d)
    if (layout.in_stride[d] % V != 0 || layout.out_stride[d] % V != 0) return false;
  if (layout.in_member_stride % V != 0 || layout.out_member_stride % V != 0) return false;
  return aligned16(x) && aligned16(cos) && aligned16(sin) && aligned16(out);
}

cudaError_t run(Dtype dtype, const void* x, const void* cos, const void* sin, void* out, const RotaryLayout& layout,
                Map map, cudaStream_t stream) {
  const int64_t pairs = layout.batch * layout.heads * layout.seq * (layout.head_dim / 2);
  if (pairs == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    const T* ct = static_cast<const T*>(cos);
    const T* st = static_cast<const T*>(sin);
    T* ot = static_cast<T*>(out);
    // 32-bit index arithmetic while the index and its grid-stride step cannot wrap (offsets are
    // formed from the 64-bit strides either way).
    const bool narrow = pairs < (int64_t{1} << 31);
    if (rotary_vectorizable<T>(x, cos, sin, out, layout)) {
      constexpr int V = kVectorWidth<T>;
      if (narrow)
        launch<T, V, uint32_t>(xt, ct, st, ot, layout, map, pairs / V, stream);
      else
        launch<T, V, int64_t>(xt, ct, st, ot, layout, map, pairs / V, stream);
    } else if (narrow) {
      launch<T, 1, uint32_t>(xt, ct, st, ot, layout, map, pairs, stream);
    } else {
      launch<T, 1, int64_t>(xt, ct, st, ot, layout, map, pairs, stream);
    }
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t rotary(Dtype dtype, const void* x, const void* cos, const void* sin, void* out, const RotaryLayout& layout,
                   bool inverse, cudaStream_t stream) {
  if (!inverse && layout.amax_slots != nullptr) return cudaErrorInvalidValue;
  return run(dtype, x, cos, sin, out, layout, inverse ? Map::kInverse : Map::kForward, stream);
}

cudaError_t copy_heads(Dtype dtype, const void* x, void* out, const RotaryLayout& layout, cudaStream_t stream) {
  return run(dtype, x, nullptr, nullptr, out, layout, Map::kCopy, stream);
}

}  // namespace triax::kernels
