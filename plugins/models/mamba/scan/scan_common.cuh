// Device pieces shared by the scan's forward and backward kernels: the thread layout (four
// threads per channel, each holding S of the n states in registers), the fast exponential and
// softplus, and the staging of one piece of the sequence into shared memory.
#pragma once

#include <type_traits>

#include "kernel_utils.cuh"
#include "scan_kernels.hpp"

namespace triax::mamba::kernels {

using triax::kernels::from_float;
using triax::kernels::to_float;

// Threads per channel: lanes 4c..4c+3 of a warp share channel c, lane 4c+g holds states g*S..g*S+S-1.
constexpr int kGroups = 4;
constexpr float kLog2e = 1.4426950408889634f;

// 2^x in one MUFU instruction (relative error about 2^-22); the scan needs one per state and position.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// torch's softplus (beta 1, threshold 20): the identity above 20.
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }
// Its derivative, the logistic function (1 above the threshold).
__device__ __forceinline__ float softplus_slope(float x) { return x > 20.f ? 1.f : 1.f / (1.f + __expf(-x)); }

// Sum over the four lanes of one channel; every one of them gets it.
__device__ __forceinline__ float channel_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// Shared-memory tiles of one piece of `T` positions of `CH` channels ([CH][T + 1] floats: the
// extra column keeps the channel rows on distinct banks) and B, C as [T][NS + 4] (padded states).
template <int CH, int T, int NS>
struct StageTiles {
  static constexpr int kRow = T + 1;
  static constexpr int kStateRow = NS + 4;
  float dt[CH][kRow];        // softplus(delta + bias)
  float dt_u[CH][kRow];      // dt * u
  float u[CH][kRow];
  alignas(16) float B[T][kStateRow];
  alignas(16) float C[T][kStateRow];
};

// Loads positions [start, start + len) of channels [c0, c0 + CH) of batch b into `tiles`, fp32;
// positions and channels outside the operands read as zero (dt = 0: the state passes unchanged).
// slope: optional [CH][T + 1] tile receiving softplus'(delta + bias).
template <typename T_, int CH, int T, int NS>
__device__ void stage_piece(const ScanOperands& in, int64_t b, int64_t c0, int64_t start, int len,
                            StageTiles<CH, T, NS>& tiles, float (*slope)[T + 1]) {
  const T_* u = static_cast<const T_*>(in.u);
  const T_* delta = static_cast<const T_*>(in.delta);
  const T_* Bp = static_cast<const T_*>(in.B);
  const T_* Cp = static_cast<const T_*>(in.C);
  for (int e = threadIdx.x; e < CH * T; e += blockDim.x) {
    const int c = e / T, t = e % T;
    const int64_t channel = c0 + c;
    float dt = 0.f, uu = 0.f, sl = 0.f;
    if (channel < in.channels && t < len) {
      const int64_t at = (b * in.channels + channel) * in.length + start + t;
      float x = to_float(delta[at]);
      if (in.delta_bias) x += in.delta_bias[channel];
      dt = in.delta_softplus ? softplus(x) : x;
      sl = in.delta_softplus ? softplus_slope(x) : 1.f;
      uu = to_float(u[at]);
    }
    tiles.dt[c][t] = dt;
    tiles.dt_u[c][t] = dt * uu;
    tiles.u[c][t] = uu;
    if (slope) slope[c][t] = sl;
  }
  for (int e = threadIdx.x; e < NS * T; e += blockDim.x) {
    const int s = e / T, t = e % T;
    float bv = 0.f, cv = 0.f;
    if (s < in.state && t < len) {
      const int64_t at = (b * in.state + s) * in.length + start + t;
      bv = to_float(Bp[at]);
      cv = to_float(Cp[at]);
    }
    tiles.B[t][s] = bv;
    tiles.C[t][s] = cv;
  }
}

// The S values at row + g*S, e.g. the padded states g*S..g*S+S-1 of a B or C tile (16-byte loads when S % 4 == 0).
template <int S>
__device__ __forceinline__ void load_states(const float* row, int g, float (&out)[S]) {
  if constexpr (S % 4 == 0) {
#pragma unroll
    for (int j = 0; j < S; j += 4) {
      const float4 v = *reinterpret_cast<const float4*>(row + g * S + j);
      out[j] = v.x, out[j + 1] = v.y, out[j + 2] = v.z, out[j + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < S; ++j) out[j] = row[g * S + j];
  }
}

// Stores S values at row + g*S (16-byte stores when S % 4 == 0).
template <int S>
__device__ __forceinline__ void store_states(float* row, int g, const float (&v)[S]) {
  if constexpr (S % 4 == 0) {
#pragma unroll
    for (int j = 0; j < S; j += 4)
      *reinterpret_cast<float4*>(row + g * S + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
  } else {
#pragma unroll
    for (int j = 0; j < S; ++j) row[g * S + j] = v[j];
  }
}

// Calls f(std::integral_constant<int, S>{}) with the states per thread for n states (n <= kMaxState).
template <typename F>
cudaError_t dispatch_states(int64_t n, F&& f) {
  if (n <= 4) return f(std::integral_constant<int, 1>{});
  if (n <= 8) return f(std::integral_constant<int, 2>{});
  if (n <= 16) return f(std::integral_constant<int, 4>{});
  if (n <= 32) return f(std::integral_constant<int, 8>{});
  if (n <= 64) return f(std::integral_constant<int, 16>{});
  return cudaErrorInvalidValue;
}

}  // namespace triax::mamba::kernels
