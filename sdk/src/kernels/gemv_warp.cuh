// One warp's share of a decoding GEMV (gemv.cu, norm_gemv.cu): the warp of output `feature` reads
// its P rows of w once, in 16-byte vectors, for each of the R rows of x, reduces over its lanes,
// and lane 0 writes y (with P = 2, gate and up rounded as the plain product would store them,
// then silu(gate) * up). Every variant sums in this order (each lane its vectors in ascending
// order, one product at a time, then the warp's reduction), so their products have the same bits.
#pragma once

#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {

// The products of one 16-byte vector of each of the P weight rows (at element i) with the R rows
// of x, added to the lane's sums: the one step every variant takes, in the same order.
template <typename T, int R, int P>
__device__ __forceinline__ void add_vector_products(float (&sums)[P][R], const Pack<T, kVectorWidth<T>> (&weights)[P],
                                                    const T* __restrict__ x, int64_t in_features, int64_t i) {
  constexpr int V = kVectorWidth<T>;
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const Pack<T, V> inputs = load_pack<T, V>(x + r * in_features + i);
#pragma unroll
      for (int k = 0; k < V; ++k) sums[p][r] += to_float(weights[p].v[k]) * to_float(inputs.v[k]);
    }
}

// The lanes' sums reduced over the warp, written by lane 0.
template <typename T, int R, int P>
__device__ __forceinline__ void write_warp_sums(float (&sums)[P][R], T* __restrict__ y, int64_t feature,
                                                int64_t out_features, int lane) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float totals[P];
#pragma unroll
    for (int p = 0; p < P; ++p) totals[p] = warp_reduce(sums[p][r], SumOp());
    if (lane != 0) continue;
    if constexpr (P == 2)
      y[r * out_features + feature] = from_float<T>(swiglu_of(rounded_to<T>(totals[0]), rounded_to<T>(totals[1])));
    else
      y[r * out_features + feature] = from_float<T>(totals[0]);
  }
}

// The weights streamed: each vector loaded in the loop that uses it (unrolled 4 deep).
template <typename T, int R, int P>
__device__ __forceinline__ void warp_gemv_rows(const T* (&rows)[P], const T* __restrict__ x, T* __restrict__ y,
                                               int64_t feature, int64_t out_features, int64_t in_features, int lane) {
  constexpr int V = kVectorWidth<T>;
  float sums[P][R] = {};
#pragma unroll 4
  for (int64_t i = static_cast<int64_t>(lane) * V; i < in_features; i += 32 * V) {
    Pack<T, V> weights[P];
#pragma unroll
    for (int p = 0; p < P; ++p) weights[p] = load_pack<T, V>(rows[p] + i);
    add_vector_products<T, R, P>(sums, weights, x, in_features, i);
  }
  write_warp_sums<T, R, P>(sums, y, feature, out_features, lane);
}

// K consecutive vectors of a lane in each of the P weight rows, held in registers: all loaded
// before any is used, so that K loads a row are in flight at once.
template <typename T, int P, int K>
struct HeldWeights {
  Pack<T, kVectorWidth<T>> vectors[K][P];
  // The lane's vectors from element `first` on (first, first + 32 V, ...; those past the row not read).
  __device__ __forceinline__ void load(const T* (&rows)[P], int64_t in_features, int64_t first) {
    constexpr int V = kVectorWidth<T>;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int64_t i = first + static_cast<int64_t>(j) * 32 * V;
      if (i < in_features)
#pragma unroll
        for (int p = 0; p < P; ++p) vectors[j][p] = load_pack<T, V>(rows[p] + i);
    }
  }
};

// v as the compiler must take it to change here: the 16-bit vectors held are not unpacked to
// fp32 registers before their turn (unpacked early, a bf16 lane's held vectors take twice the registers).
template <typename T, int V>
__device__ __forceinline__ void pin(Pack<T, V>& v) {
  static_assert(sizeof(v) == 16);
  unsigned* words = reinterpret_cast<unsigned*>(&v);
  asm volatile("" : "+r"(words[0]), "+r"(words[1]), "+r"(words[2]), "+r"(words[3]));
}

// warp_gemv_rows's sums from weights held K vectors a row at a time, the first K already loaded
// into `held` by the caller (before it waits for the kernel that writes x): the same bits.
template <typename T, int R, int P, int K>
__device__ __forceinline__ void warp_gemv_held_rows(HeldWeights<T, P, K>& held, const T* (&rows)[P],
                                                    const T* __restrict__ x, T* __restrict__ y, int64_t feature,
                                                    int64_t out_features, int64_t in_features, int lane) {
  constexpr int V = kVectorWidth<T>;
  constexpr int64_t kStride = 32 * V;  // elements between a lane's consecutive vectors
  float sums[P][R] = {};
  for (int64_t first = static_cast<int64_t>(lane) * V;;) {
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int64_t i = first + j * kStride;
      if (i < in_features) {
#pragma unroll
        for (int p = 0; p < P; ++p) pin(held.vectors[j][p]);
        add_vector_products<T, R, P>(sums, held.vectors[j], x, in_features, i);
      }
    }
    first += K * kStride;
    if (first >= in_features) break;
    held.load(rows, in_features, first);
  }
  write_warp_sums<T, R, P>(sums, y, feature, out_features, lane);
}

}  // namespace triax::kernels
