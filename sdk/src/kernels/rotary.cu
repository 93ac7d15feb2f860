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
// rotary_walks() runs several forward walks (the fused projection's q, k and v) in one launch.
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

// Vector `index` of one walk: ((b * seq + s) * heads + h) * chunks + chunk, with chunks =
// head_dim / 2 / V; max |stored| into amax when kAmax.
template <typename T, int V, Map kMap, typename Index, bool kAmax>
__device__ __forceinline__ void walk_vector(const T* __restrict__ x, const T* __restrict__ cos,
                                            const T* __restrict__ sin, T* __restrict__ out, const RotaryLayout& layout,
                                            Index index, float& amax) {
  const Index heads = static_cast<Index>(layout.heads), seq = static_cast<Index>(layout.seq);
  const Index half = static_cast<Index>(layout.head_dim / 2), chunks = half / V;
  const Index group = static_cast<Index>(layout.group);
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
    return;
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

template <typename T, int V, Map kMap, typename Index, bool kAmax = false>
__global__ void rotary_kernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                              T* __restrict__ out, RotaryLayout layout, Index work) {
  float amax = 0.0f;
  for (Index index = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; index < work;
       index += static_cast<Index>(gridDim.x) * blockDim.x)
    walk_vector<T, V, kMap, Index, kAmax>(x, cos, sin, out, layout, index, amax);
  if constexpr (kAmax) {
    __shared__ float scratch[33];
    fold_block_amax(amax, scratch, layout.amax_slots);
  }
}

// The walks of one rotary_walks() launch; ends[w]: the end of walk w's vectors in the grid's
// order (walks past `count` end where the last one does, so no index reaches them).
template <typename T, typename Index>
struct WalkList {
  const T* x[kRotaryMaxWalks];
  T* out[kRotaryMaxWalks];
  RotaryLayout layout[kRotaryMaxWalks];
  Index ends[kRotaryMaxWalks];
  bool copy[kRotaryMaxWalks];
};

template <typename T, int V, typename Index, int W>
__device__ __forceinline__ void walk_vector_of(const WalkList<T, Index>& list, const T* __restrict__ cos,
                                               const T* __restrict__ sin, Index index) {
  float unused = 0.0f;
  const Index local = W == 0 ? index : index - list.ends[W - 1];
  if (list.copy[W])
    walk_vector<T, V, Map::kCopy, Index, false>(list.x[W], cos, sin, list.out[W], list.layout[W], local, unused);
  else
    walk_vector<T, V, Map::kForward, Index, false>(list.x[W], cos, sin, list.out[W], list.layout[W], local, unused);
}

template <typename T, int V, typename Index>
__global__ void rotary_walks_kernel(WalkList<T, Index> list, const T* __restrict__ cos, const T* __restrict__ sin) {
  static_assert(kRotaryMaxWalks == 3, "one branch a walk");
  const Index work = list.ends[kRotaryMaxWalks - 1];
  for (Index index = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; index < work;
       index += static_cast<Index>(gridDim.x) * blockDim.x) {
    // Constant walk indices: each walk's operands stay kernel parameters, read in place.
    if (index < list.ends[0])
      walk_vector_of<T, V, Index, 0>(list, cos, sin, index);
    else if (index < list.ends[1])
      walk_vector_of<T, V, Index, 1>(list, cos, sin, index);
    else
      walk_vector_of<T, V, Index, 2>(list, cos, sin, index);
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

template <typename T, int V, typename Index>
void launch_walks(const RotaryWalk* walks, int count, const T* cos, const T* sin, cudaStream_t stream) {
  WalkList<T, Index> list{};
  int64_t end = 0;
  for (int w = 0; w < kRotaryMaxWalks; ++w) {
    const RotaryWalk& walk = walks[std::min(w, count - 1)];
    if (w < count) end += walk.layout.batch * walk.layout.heads * walk.layout.seq * (walk.layout.head_dim / 2) / V;
    list.x[w] = static_cast<const T*>(walk.x);
    list.out[w] = static_cast<T*>(walk.out);
    list.layout[w] = walk.layout;
    list.ends[w] = static_cast<Index>(end);
    list.copy[w] = walk.copy;
  }
  rotary_walks_kernel<T, V, Index><<<grid_for(end, kThreads), kThreads, 0, stream>>>(list, cos, sin);
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

cudaError_t rotary_walks(Dtype dtype, const RotaryWalk* walks, int count, const void* cos, const void* sin,
                         cudaStream_t stream) {
  if (count < 1 || count > kRotaryMaxWalks) return cudaErrorInvalidValue;
  int64_t pairs = 0;
  for (int w = 0; w < count; ++w) {
    const RotaryLayout& layout = walks[w].layout;
    if (layout.amax_slots != nullptr) return cudaErrorInvalidValue;
    pairs += layout.batch * layout.heads * layout.seq * (layout.head_dim / 2);
  }
  if (pairs == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ct = static_cast<const T*>(cos);
    const T* st = static_cast<const T*>(sin);
    bool vectorizable = true;
    for (int w = 0; w < count; ++w)
      vectorizable = vectorizable && rotary_vectorizable<T>(walks[w].x, cos, sin, walks[w].out, walks[w].layout);
    const bool narrow = pairs < (int64_t{1} << 31);  // as in run()
    if (vectorizable) {
      constexpr int V = kVectorWidth<T>;
      if (narrow)
        launch_walks<T, V, uint32_t>(walks, count, ct, st, stream);
      else
        launch_walks<T, V, int64_t>(walks, count, ct, st, stream);
    } else if (narrow) {
      launch_walks<T, 1, uint32_t>(walks, count, ct, st, stream);
    } else {
      launch_walks<T, 1, int64_t>(walks, count, ct, st, stream);
    }
    return cudaGetLastError();
  });
}

}  // namespace triax::kernels
