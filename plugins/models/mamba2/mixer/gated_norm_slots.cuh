// A thread's channels of a group's row in the register-resident generations (gated_norm_v2.cu,
// gated_norm_backward_v3.cu): which 16-byte vectors of the group it owns (its slots, the same in
// every row it visits), their weights and D read once per launch (v2), and their loads and stores
// as stored (v2, v3).
#pragma once

#include "gated_norm_operands.cuh"

namespace triax::mamba2::kernels {

using triax::kernels::from_float;
using triax::kernels::kVectorWidth;
using triax::kernels::load_pack;
using triax::kernels::Pack;
using triax::kernels::store_pack;

// N elements from p as they are stored (kept so until used: half the registers of fp32 for
// 16-bit types): 16-byte vectors, or `count` single loads (zeros past it).
template <bool Vectorized, int N, typename U>
__device__ __forceinline__ Pack<U, N> load_channels(const U* p, int count) {
  Pack<U, N> v;
  if constexpr (Vectorized) {
    constexpr int W = kVectorWidth<U>;
#pragma unroll
    for (int j = 0; j < N / W; ++j) {
      const Pack<U, W> part = load_pack<U, W>(p + j * W);
#pragma unroll
      for (int i = 0; i < W; ++i) v.v[j * W + i] = part.v[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v.v[i] = i < count ? p[i] : from_float<U>(0.f);
  }
  return v;
}

template <bool Vectorized, int N, typename U>
__device__ __forceinline__ void store_channels(U* p, int count, const float (&v)[N]) {
  if constexpr (Vectorized) {
    constexpr int W = kVectorWidth<U>;
#pragma unroll
    for (int j = 0; j < N / W; ++j) {
      Pack<U, W> pack;
#pragma unroll
      for (int i = 0; i < W; ++i) pack.v[i] = from_float<U>(v[j * W + i]);
      store_pack<U, W>(p + j * W, pack);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (i < count) p[i] = from_float<U>(v[i]);
  }
}

// A thread's channels of its group: slot k starts at channel first[k] and holds count[k] of them
// (N, fewer at the end of an odd group, 0 past it), with their weights and D, read once per
// launch. Vectorized launches have whole vectors per head (head_dim a multiple of N): one D each.
template <int K, int N, bool Vectorized>
struct Slots {
  static constexpr int kSkips = Vectorized ? 1 : N;
  int first[K], count[K];
  float weight[K][N], skip[K][kSkips];
  __device__ __forceinline__ float skip_of(int k, int i) const { return skip[k][Vectorized ? 0 : i]; }
};

template <int K, int N, bool Vectorized, typename T, typename Y>
__device__ __forceinline__ Slots<K, N, Vectorized> slots_of(const Operands<T, Y>& o, int64_t group) {
  using S = Slots<K, N, Vectorized>;
  S s;
  const int channels = static_cast<int>(o.channels);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    s.first[k] = (k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * N;
    s.count[k] = max(0, min(N, channels - s.first[k]));
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int64_t channel = group * o.channels + s.first[k] + i;
      s.weight[k][i] = i < s.count[k] ? o.weight[channel] : 0.f;
      if (i < S::kSkips) s.skip[k][i] = i < s.count[k] ? o.D[channel / o.head_dim] : 0.f;
    }
  }
  return s;
}

}  // namespace triax::mamba2::kernels
