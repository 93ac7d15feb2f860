// One warp's share of a decoding GEMV (gemv.cu, norm_gemv.cu): the warp of output `feature` reads
// its P rows of w once, in 16-byte vectors, for each of the R rows of x, reduces over its lanes,
// and lane 0 writes y (with P = 2, gate and up rounded as the plain product would store them,
// then silu(gate) * up). Both kernels sum in this order, so their products have the same bits.
#pragma once

#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {

// sums[r] += the products of one 16-byte vector of weights with x's row r at column i, in the
// order every decoding GEMV sums them.
template <typename T, int R>
__device__ __forceinline__ void add_products(float (&sums)[R], const Pack<T, kVectorWidth<T>>& weights,
                                             const T* __restrict__ x, int64_t in_features, int64_t i) {
  constexpr int V = kVectorWidth<T>;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const Pack<T, V> inputs = load_pack<T, V>(x + r * in_features + i);
#pragma unroll
    for (int k = 0; k < V; ++k) sums[r] += to_float(weights.v[k]) * to_float(inputs.v[k]);
  }
}

template <typename T, int R, int P>
__device__ __forceinline__ void warp_gemv_rows(const T* (&rows)[P], const T* __restrict__ x, T* __restrict__ y,
                                               int64_t feature, int64_t out_features, int64_t in_features, int lane) {
  constexpr int V = kVectorWidth<T>;
  float sums[P][R] = {};
#pragma unroll 4
  for (int64_t i = static_cast<int64_t>(lane) * V; i < in_features; i += 32 * V) {
#pragma unroll
    for (int p = 0; p < P; ++p) add_products<T, R>(sums[p], load_pack<T, V>(rows[p] + i), x, in_features, i);
  }
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

}  // namespace triax::kernels
