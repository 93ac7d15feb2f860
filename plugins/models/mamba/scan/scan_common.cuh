// Device pieces shared by the scan's forward and backward kernels: the thread layout (G threads
// per channel, each holding S of the n states in registers), the fast exponential and softplus,
// and the staging of one piece of the sequence into shared memory.
#pragma once

#include <type_traits>

#include "scan_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba::kernels {

using triax::kernels::from_float;
using triax::kernels::to_float;

constexpr float kLog2e = 1.4426950408889634f;
constexpr int64_t kMaxGridBlocks = (int64_t{1} << 31) - 1;  // of a grid's x dimension

// 2^x in one MUFU instruction (relative error about 2^-22); the scan needs one per state and position.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// torch's softplus (beta 1, threshold 20): the identity above 20. log(1 + e) through the MUFU
// logarithm, whose absolute error (about 2^-21) would swamp a small result, so below e = 1/32
// the series e - e^2/2 + e^3/3 - e^4/4 (relative error about 2^-22) instead; log1pf costs
// some forty instructions, which the forward pays for every channel and position.
__device__ __forceinline__ float softplus(float x) {
  if (x > 20.f) return x;
  const float e = __expf(x);
  if (e < 0.03125f) return e * (1.f - e * (0.5f - e * (1.f / 3.f - e * 0.25f)));
  return __logf(1.f + e);
}
// Its derivative, the logistic function (1 above the threshold).
__device__ __forceinline__ float softplus_slope(float x) { return x > 20.f ? 1.f : 1.f / (1.f + __expf(-x)); }

// SiLU, x * sigmoid(x): the output gate's; 0 where exp(-x) overflows.
__device__ __forceinline__ float silu(float x) { return __fdividef(x, 1.f + __expf(-x)); }

// Sum over the G lanes of one channel (lanes Gc..Gc+G-1 of a warp); every one of them gets it.
template <int G>
__device__ __forceinline__ float channel_sum(float v) {
#pragma unroll
  for (int mask = 1; mask < G; mask <<= 1) v += __shfl_xor_sync(0xffffffffu, v, mask);
  return v;
}

// One halving round of a reduce-scatter between the two lanes that differ in `mask`: the lower
// lane keeps the sums of v[0 .. half), the higher those of v[half .. 2 half), both in
// v[0 .. half). Returns the offset of the values kept (half on the higher lane, else 0).
template <int V>
__device__ __forceinline__ int keep_half_summed(float (&v)[V], int half, int mask, bool high) {
#pragma unroll
  for (int j = 0; j < V / 2; ++j) {
    if (j >= half) break;
    const float send = high ? v[j] : v[j + half];
    const float keep = high ? v[j + half] : v[j];
    v[j] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
  }
  return high ? half : 0;
}

// Reduce-scatter over the G lanes of a channel (lane bits 0 .. log2(G) - 1): afterwards
// v[0 .. V/G) hold the sums over the G lanes of the values first .. first + V/G of v; returns first.
template <int G, int V>
__device__ __forceinline__ int sum_over_channel_lanes(float (&v)[V], int g) {
  static_assert(G == 4 || G == 8, "four or eight lanes per channel");
  static_assert(V % G == 0, "whole shares");
  constexpr int kRounds = G == 4 ? 2 : 3;
  int first = 0;
#pragma unroll
  for (int round = 0; round < kRounds; ++round) {
    const int mask = 1 << round;
    first += keep_half_summed(v, V >> (round + 1), mask, g & mask);
  }
  return first;
}

// Shared-memory tiles of one piece of `T` positions of `CH` channels ([CH][T + 1] floats: the
// extra column keeps the channel rows on distinct banks) and B, C as [T][NS + 4] (padded states).
template <int CH, int T, int NS>
struct StageTiles {
  static constexpr int kRow = T + 1;
  static constexpr int kStateRow = NS + 4;
  float dt[CH][kRow];    // softplus(delta + bias)
  float dt_u[CH][kRow];  // dt * u
  float u[CH][kRow];
  float z[CH][kRow];      // the gate's input (when there is a gate)
  float grad[CH][kRow];   // the output's gradient (backward only)
  float slope[CH][kRow];  // softplus'(delta + bias) (backward only)
  alignas(16) float B[T][kStateRow];
  alignas(16) float C[T][kStateRow];
};

// The raw inputs of one piece in registers: loaded while the previous piece is computed, so that
// the global-memory latency hides behind the scan. Thread x holds elements x, x + THREADS, ...
// of the piece's [CH][T] rows and [NS][T] state rows (position fastest: coalesced reads).
template <typename E, int CH, int T, int NS, int THREADS, bool kBackward>
struct PieceRegisters {
  static constexpr int kRows = CH * T / THREADS;
  static constexpr int kStates = NS * T / THREADS;
  static_assert(CH * T % THREADS == 0 && NS * T % THREADS == 0, "whole rows per thread");
  E u[kRows], delta[kRows], z[kRows], grad[kRows];
  E B[kStates], C[kStates];

  // Positions [start, start + len) of channels [c0, c0 + CH) of batch b; zeros outside.
  __device__ __forceinline__ void load(const ScanOperands& in, const E* grad_y, int64_t b, int64_t c0, int64_t start,
                                       int len) {
    const E zero = from_float<E>(0.f);
    const E* pu = static_cast<const E*>(in.u);
    const E* pdelta = static_cast<const E*>(in.delta);
    const E* pz = static_cast<const E*>(in.z);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int e = threadIdx.x + i * THREADS, c = e / T, t = e % T;
      const bool inside = c0 + c < in.channels && t < len;
      const int64_t at = (b * in.channels + c0 + c) * in.length + start + t;
      u[i] = inside ? pu[at] : zero;
      delta[i] = inside ? pdelta[at] : zero;
      z[i] = inside && pz ? pz[at] : zero;
      if constexpr (kBackward) grad[i] = inside ? grad_y[at] : zero;
    }
    const E* pB = static_cast<const E*>(in.B);
    const E* pC = static_cast<const E*>(in.C);
#pragma unroll
    for (int i = 0; i < kStates; ++i) {
      const int e = threadIdx.x + i * THREADS, s = e / T, t = e % T;
      const bool inside = s < in.state && t < len;
      const int64_t at = (b * in.state + s) * in.length + start + t;
      B[i] = inside ? pB[at] : zero;
      C[i] = inside ? pC[at] : zero;
    }
  }

  // Into the tiles, in fp32, with dt = softplus(delta + bias). Positions and channels outside
  // the operands get dt = 0 (the state passes unchanged) and zeros elsewhere.
  __device__ __forceinline__ void store(const ScanOperands& in, int64_t c0, int len,
                                        StageTiles<CH, T, NS>& tiles) const {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int e = threadIdx.x + i * THREADS, c = e / T, t = e % T;
      const int64_t channel = c0 + c;
      float dt = 0.f, slope = 0.f;
      if (channel < in.channels && t < len) {
        float x = to_float(delta[i]);
        if (in.delta_bias) x += in.delta_bias[channel];
        dt = in.delta_softplus ? softplus(x) : x;
        if constexpr (kBackward) slope = in.delta_softplus ? softplus_slope(x) : 1.f;
      }
      const float uu = to_float(u[i]);
      tiles.dt[c][t] = dt;
      tiles.dt_u[c][t] = dt * uu;
      tiles.u[c][t] = uu;
      tiles.z[c][t] = to_float(z[i]);
      if constexpr (kBackward) {
        tiles.grad[c][t] = to_float(grad[i]);
        tiles.slope[c][t] = slope;
      }
    }
#pragma unroll
    for (int i = 0; i < kStates; ++i) {
      const int e = threadIdx.x + i * THREADS, s = e / T, t = e % T;
      tiles.B[t][s] = to_float(B[i]);
      tiles.C[t][s] = to_float(C[i]);
    }
  }
};

// The S values at row + g*S, e.g. the padded states g*S..g*S+S-1 of a B or C tile (16-byte
// loads when S % 4 == 0, 8-byte ones when S is 2).
template <int S>
__device__ __forceinline__ void load_states(const float* row, int g, float (&out)[S]) {
  if constexpr (S % 4 == 0) {
#pragma unroll
    for (int j = 0; j < S; j += 4) {
      const float4 v = *reinterpret_cast<const float4*>(row + g * S + j);
      out[j] = v.x, out[j + 1] = v.y, out[j + 2] = v.z, out[j + 3] = v.w;
    }
  } else if constexpr (S == 2) {
    const float2 v = *reinterpret_cast<const float2*>(row + g * S);
    out[0] = v.x, out[1] = v.y;
  } else {
#pragma unroll
    for (int j = 0; j < S; ++j) out[j] = row[g * S + j];
  }
}

// Stores S values at row + g*S (16-byte stores when S % 4 == 0, 8-byte ones when S is 2).
template <int S>
__device__ __forceinline__ void store_states(float* row, int g, const float (&v)[S]) {
  if constexpr (S % 4 == 0) {
#pragma unroll
    for (int j = 0; j < S; j += 4)
      *reinterpret_cast<float4*>(row + g * S + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
  } else if constexpr (S == 2) {
    *reinterpret_cast<float2*>(row + g * S) = make_float2(v[0], v[1]);
  } else {
#pragma unroll
    for (int j = 0; j < S; ++j) row[g * S + j] = v[j];
  }
}

// Advances this lane's S states h through positions first .. first + H - 1 of a staged piece
// (`in`: StageTiles) and leaves C_t . h_t of its states in part[t - first]; keep(t, h) sees
// every state h_t (the backward stores them). One exp2 per state and position.
template <int H, int S, typename Tiles, typename Keep>
__device__ __forceinline__ void scan_positions(const Tiles& in, int first, int c, int g, const float (&A2)[S],
                                               float (&h)[S], float (&part)[H], Keep&& keep) {
#pragma unroll
  for (int t = 0; t < H; ++t) {
    const float dt = in.dt[c][first + t], dt_u = in.dt_u[c][first + t];
    float Bt[S], Ct[S];
    load_states(in.B[first + t], g, Bt);
    load_states(in.C[first + t], g, Ct);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < S; ++j) {
      h[j] = fast_exp2(dt * A2[j]) * h[j] + dt_u * Bt[j];
      acc += Ct[j] * h[j];
    }
    keep(first + t, h);
    part[t] = acc;
  }
}

// Calls f(TypeTag<T>{}) with the element type of the scan's activations: fp32 or bf16.
template <typename F>
cudaError_t dispatch_scan_dtype(Dtype dtype, F&& f) {
  switch (dtype) {
    case Dtype::Float32:
      return f(triax::kernels::TypeTag<float>{});
    case Dtype::BFloat16:
      return f(triax::kernels::TypeTag<__nv_bfloat16>{});
    default:
      return cudaErrorInvalidValue;
  }
}

// Calls f(integral_constant<G>, integral_constant<S>) with the lanes per channel G and the
// states per lane S for n states (n <= kMaxState). Eight lanes a channel where n allows: the scan
// has only batch x channels x G threads of work, and at Mamba-130m's shapes four per channel
// leave too few warps per scheduler to hide the exponential's and the recurrence's latency.
template <typename F>
cudaError_t dispatch_layout(int64_t n, F&& f) {
  using std::integral_constant;
  if (n <= 4) return f(integral_constant<int, 4>{}, integral_constant<int, 1>{});
  if (n <= 8) return f(integral_constant<int, 8>{}, integral_constant<int, 1>{});
  if (n <= 16) return f(integral_constant<int, 8>{}, integral_constant<int, 2>{});
  if (n <= 32) return f(integral_constant<int, 8>{}, integral_constant<int, 4>{});
  return cudaErrorInvalidValue;
}

}  // namespace triax::mamba::kernels
