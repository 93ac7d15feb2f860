// The SSM half of a Mamba layer's decoding step (step_kernels.hpp), in two layouts, each the faster
// at its batch size (SsmStepOperands::thread_per_channel, chosen in decode_step.cpp):
// - lane per state (below 16 rows): L lanes share one (row, channel), L the state size rounded up to a
//   power of two (4 to 32); lane g holds the states g, g + L, ..., so a warp's state reads and
//   writes are consecutive floats; the lanes' parts of C . h (and, with dt_proj folded in, of the
//   channel's dot product of dt_proj's weight row and the row's dt) are summed by shuffles.
// - thread per channel (from 16 rows): one thread per (row, channel) loads everything it reads (its states, A_log's
//   row, the row's B and C, u, z, its dt_proj row and the row's dt) before it uses any of it, so a
//   step is one round trip to memory and the store. The lane layout chains three (the dt product,
//   the states, z) over three waves of threads at batch 32: 14 us a layer on an H100 against ~2 us
//   of bytes.
// The thread-per-channel step is latency and issue bound (49k threads at Mamba-130m, batch 32: a
// few warps an SM), and its scalar form issues ~160 loads a thread. With vector_loads (and every
// pointer and stride 16-byte aligned, else the scalar form) it reads its states, A_log's row, B, C,
// dt and dt_proj's row in 16-byte vectors (26 loads at bf16, 44 at fp32) and stores the states
// as float4: the same sums in the same order (the dt product's four chains take the elements
// k = i mod 4 in k order, C . h in j order), so the same bits: 2.8x the scalar form at batch 32 on
// an H100 (6.0 against 16.7 us a layer, bf16). Four lanes a channel, for four times the warps, were
// no faster (6.4 us) and were removed.
#include <cstdint>

#include "scan_common.cuh"
#include "step_kernels.hpp"

namespace triax::mamba::kernels {
namespace {

constexpr int kLaneThreads = 256;
constexpr int kChannelThreads = 128;  // 12 blocks of a batch-1 step at d_inner 1536: spread over SMs

template <typename T>
__device__ __forceinline__ float element(const void* p, int64_t i) {
  return to_float(static_cast<const T*>(p)[i]);
}

// A (row, channel)'s scalars besides its states: u, z, D and the dt bias (0 where absent).
struct ChannelScalars {
  float u = 0.f, z = 0.f, d_skip = 0.f, bias = 0.f;
};

template <typename T>
__device__ __forceinline__ ChannelScalars channel_scalars(const SsmStepOperands& in, int64_t unit, int64_t row,
                                                          int64_t channel) {
  ChannelScalars s;
  s.u = element<T>(in.u, unit);
  s.z = in.z ? element<T>(in.z, row * in.z_row_stride + channel) : 0.f;
  s.d_skip = in.D ? element<T>(in.D, channel) : 0.f;
  s.bias = in.delta_bias ? element<T>(in.delta_bias, channel) : 0.f;
  return s;
}

// One state's update, as the scan (selective_scan_forward.cu): exp(dt A) as 2^(dt A log2 e), dt u
// formed once by the caller. Every layout calls it, so that they agree bit for bit.
__device__ __forceinline__ float next_state(float dt, float dt_u, float a_log, float held, float b) {
  const float A = -expf(a_log);
  return fast_exp2(dt * (A * kLog2e)) * held + dt_u * b;
}

// delta of (row, channel): the operand, or dt_proj's weight row . dt[row] summed over the L lanes
// (every lane of the warp calls it: the shuffles need them all), rounded to T as a product's output.
template <typename T, int L>
__device__ __forceinline__ float delta_of(const SsmStepOperands& in, bool live, int64_t unit, int64_t row,
                                          int64_t channel, int g) {
  if (!in.dt_proj_weight) return live ? element<T>(in.delta, unit) : 0.f;
  float partial = 0.f;
  if (live)
    for (int64_t k = g; k < in.dt_rank; k += L)
      partial +=
          element<T>(in.dt, row * in.dt_row_stride + k) * element<T>(in.dt_proj_weight, channel * in.dt_rank + k);
#pragma unroll
  for (int mask = L / 2; mask > 0; mask >>= 1) partial += __shfl_xor_sync(0xffffffffu, partial, mask);
  return triax::kernels::rounded_to<T>(partial);
}

template <typename T, int L>
__global__ void __launch_bounds__(kLaneThreads) lane_per_state_kernel(SsmStepOperands in, float* __restrict__ state,
                                                                  T* __restrict__ y) {
  const int64_t thread = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t unit = thread / L;  // row * d + channel
  const int g = static_cast<int>(thread % L);
  const bool live = unit < in.rows * in.channels;  // idle lanes still join the shuffles
  const int64_t row = live ? unit / in.channels : 0, channel = live ? unit % in.channels : 0;
  const float delta = delta_of<T, L>(in, live, unit, row, channel, g);
  float u = 0.f, partial = 0.f;
  if (live) {
    u = element<T>(in.u, unit);
    const float bias = in.delta_bias ? element<T>(in.delta_bias, channel) : 0.f;
    // As the scan (selective_scan_forward.cu): dt u formed once, exp(dt A) as 2^(dt A log2 e).
    const float dt = softplus(delta + bias), dt_u = dt * u;
    const int64_t bc = row * in.bc_row_stride;
    float* h = state + unit * in.state;
    for (int64_t j = g; j < in.state; j += L) {
      const float next = next_state(dt, dt_u, element<T>(in.A_log, channel * in.state + j), h[j],
                                    element<T>(in.B, bc + j));
      h[j] = next;
      partial += element<T>(in.C, bc + j) * next;
    }
  }
#pragma unroll
  for (int mask = L / 2; mask > 0; mask >>= 1) partial += __shfl_xor_sync(0xffffffffu, partial, mask);
  if (!live || g != 0) return;
  float out = partial + (in.D ? element<T>(in.D, channel) * u : 0.f);
  if (in.z) out *= silu(element<T>(in.z, row * in.z_row_stride + channel));
  y[unit] = from_float<T>(out);
}

// delta of (row, channel): the operand, or dt_proj's weight row . dt[row], rounded to T as the
// product's output would be.
template <typename T>
__device__ __forceinline__ float channel_delta(const SsmStepOperands& in, int64_t unit, int64_t row, int64_t channel) {
  if (!in.dt_proj_weight) return element<T>(in.delta, unit);
  const T* __restrict__ dt = static_cast<const T*>(in.dt) + row * in.dt_row_stride;
  const T* __restrict__ weight = static_cast<const T*>(in.dt_proj_weight) + channel * in.dt_rank;
  float sums[4] = {0.f, 0.f, 0.f, 0.f};  // four chains, so that the loads run ahead of the sums
  int64_t k = 0;
  for (; k + 4 <= in.dt_rank; k += 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) sums[i] += to_float(dt[k + i]) * to_float(weight[k + i]);
  }
  for (; k < in.dt_rank; ++k) sums[0] += to_float(dt[k]) * to_float(weight[k]);
  return triax::kernels::rounded_to<T>((sums[0] + sums[1]) + (sums[2] + sums[3]));
}

// S states per pass over the channel's state (all of it when state <= S).
template <typename T, int S>
__global__ void __launch_bounds__(kChannelThreads) thread_per_channel_kernel(SsmStepOperands in, float* __restrict__ state,
                                                                  T* __restrict__ y) {
  const int64_t unit = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // row * d + channel
  if (unit >= in.rows * in.channels) return;
  const int64_t row = unit / in.channels, channel = unit % in.channels;
  const int64_t bc = row * in.bc_row_stride;
  // Loaded first, used after the states' loads below have been issued.
  const auto [u, z, d_skip, bias] = channel_scalars<T>(in, unit, row, channel);
  float* __restrict__ h = state + unit * in.state;
  float out = 0.f, dt = 0.f, dt_u = 0.f;
  for (int64_t j0 = 0; j0 < in.state; j0 += S) {
    float held[S], a_log[S], b[S], c[S];
#pragma unroll
    for (int i = 0; i < S; ++i) {
      const int64_t j = j0 + i;
      const bool in_state = j < in.state;
      held[i] = in_state ? h[j] : 0.f;
      a_log[i] = in_state ? element<T>(in.A_log, channel * in.state + j) : 0.f;
      b[i] = in_state ? element<T>(in.B, bc + j) : 0.f;
      c[i] = in_state ? element<T>(in.C, bc + j) : 0.f;
    }
    if (j0 == 0) {  // as the scan (selective_scan_forward.cu): dt u formed once, exp(dt A) as 2^(dt A log2 e)
      dt = softplus(channel_delta<T>(in, unit, row, channel) + bias);
      dt_u = dt * u;
    }
#pragma unroll
    for (int i = 0; i < S; ++i) {
      const int64_t j = j0 + i;
      if (j >= in.state) break;
      const float next = next_state(dt, dt_u, a_log[i], held[i], b[i]);
      h[j] = next;
      out += c[i] * next;
    }
  }
  out += d_skip * u;
  if (in.z) out *= silu(z);
  y[unit] = from_float<T>(out);
}

using triax::kernels::kVectorWidth;
using triax::kernels::load_floats;

// channel_delta from 16-byte vectors (dt_rank a multiple of the vector width, which is a multiple
// of 4): element k of a vector goes to chain k mod 4, in k order, as channel_delta's loop adds them.
template <typename T>
__device__ __forceinline__ float channel_delta_by_vectors(const SsmStepOperands& in, int64_t unit, int64_t row,
                                                          int64_t channel) {
  if (!in.dt_proj_weight) return element<T>(in.delta, unit);
  constexpr int V = kVectorWidth<T>;
  static_assert(V % 4 == 0, "a vector holds whole rounds of the four chains");
  const T* __restrict__ dt = static_cast<const T*>(in.dt) + row * in.dt_row_stride;
  const T* __restrict__ weight = static_cast<const T*>(in.dt_proj_weight) + channel * in.dt_rank;
  float sums[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
  for (int64_t k = 0; k < in.dt_rank; k += V) {
    float dt_k[V], weight_k[V];
    load_floats<T, V>(dt + k, dt_k);
    load_floats<T, V>(weight + k, weight_k);
#pragma unroll
    for (int i = 0; i < V; ++i) sums[i % 4] += dt_k[i] * weight_k[i];
  }
  return triax::kernels::rounded_to<T>((sums[0] + sums[1]) + (sums[2] + sums[3]));
}

// thread_per_channel_kernel with 16-byte loads and stores (vector_loads_apply holds): the states as
// float4, A_log's row, B, C in vectors of T; the same operations in the same order.
template <typename T, int S>
__global__ void __launch_bounds__(kChannelThreads)
    vector_thread_per_channel_kernel(SsmStepOperands in, float* __restrict__ state, T* __restrict__ y) {
  constexpr int V = kVectorWidth<T>;
  static_assert(S % V == 0 && V % 4 == 0, "a pass holds whole vectors of T and of float4");
  const int64_t unit = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // row * d + channel
  if (unit >= in.rows * in.channels) return;
  const int64_t row = unit / in.channels, channel = unit % in.channels;
  const int64_t bc = row * in.bc_row_stride;
  const auto [u, z, d_skip, bias] = channel_scalars<T>(in, unit, row, channel);
  float4* __restrict__ h = reinterpret_cast<float4*>(state + unit * in.state);
  const T* __restrict__ a_row = static_cast<const T*>(in.A_log) + channel * in.state;
  const T* __restrict__ b_row = static_cast<const T*>(in.B) + bc;
  const T* __restrict__ c_row = static_cast<const T*>(in.C) + bc;
  float out = 0.f, dt = 0.f, dt_u = 0.f;
  for (int64_t j0 = 0; j0 < in.state; j0 += S) {  // state a multiple of V: each vector wholly in or out
    float held[S], a_log[S], b[S], c[S];
#pragma unroll
    for (int i = 0; i < S; i += 4) {
      const float4 four = j0 + i < in.state ? h[(j0 + i) / 4] : make_float4(0.f, 0.f, 0.f, 0.f);
      held[i] = four.x, held[i + 1] = four.y, held[i + 2] = four.z, held[i + 3] = four.w;
    }
#pragma unroll
    for (int i = 0; i < S; i += V) {
      if (j0 + i >= in.state) break;
      load_floats<T, V>(a_row + j0 + i, a_log + i);
      load_floats<T, V>(b_row + j0 + i, b + i);
      load_floats<T, V>(c_row + j0 + i, c + i);
    }
    if (j0 == 0) {
      dt = softplus(channel_delta_by_vectors<T>(in, unit, row, channel) + bias);
      dt_u = dt * u;
    }
#pragma unroll
    for (int i = 0; i < S; ++i) {
      if (j0 + i >= in.state) break;
      held[i] = next_state(dt, dt_u, a_log[i], held[i], b[i]);
      out += c[i] * held[i];
    }
#pragma unroll
    for (int i = 0; i < S; i += 4) {
      if (j0 + i >= in.state) break;
      h[(j0 + i) / 4] = make_float4(held[i], held[i + 1], held[i + 2], held[i + 3]);
    }
  }
  out += d_skip * u;
  if (in.z) out *= silu(z);
  y[unit] = from_float<T>(out);
}

template <typename T, int L>
cudaError_t launch_lanes(const SsmStepOperands& in, float* state, void* y, cudaStream_t stream) {
  lane_per_state_kernel<T, L><<<triax::kernels::grid_for(in.rows * in.channels * L, kLaneThreads, kMaxGridBlocks),
                                kLaneThreads, 0, stream>>>(in, state, static_cast<T*>(y));
  return cudaGetLastError();
}

// Every vector the vector kernel reads or writes 16-byte aligned and whole: the state size and the
// row strides multiples of the vector width (of T, hence of float4), the base pointers aligned.
template <typename T>
bool vector_loads_apply(const SsmStepOperands& in, const float* state) {
  using triax::kernels::vectorizable;
  const bool states =
      vectorizable<T>(in.state, {state, in.A_log, in.B, in.C}) && in.bc_row_stride % kVectorWidth<T> == 0;
  const bool dt_product = !in.dt_proj_weight || (vectorizable<T>(in.dt_rank, {in.dt, in.dt_proj_weight}) &&
                                                  in.dt_row_stride % kVectorWidth<T> == 0);
  return states && dt_product;
}

// The vector kernel where asked for and applicable, else the scalar one; S states per pass.
template <typename T, int S>
cudaError_t launch_channels(const SsmStepOperands& in, float* state, void* y, cudaStream_t stream) {
  const unsigned blocks = triax::kernels::grid_for(in.rows * in.channels, kChannelThreads, kMaxGridBlocks);
  if (in.vector_loads && vector_loads_apply<T>(in, state)) {
    // A pass of at least one vector of T (a state below it is no multiple of it: never here).
    constexpr int kPass = S < kVectorWidth<T> ? kVectorWidth<T> : S;
    vector_thread_per_channel_kernel<T, kPass><<<blocks, kChannelThreads, 0, stream>>>(in, state, static_cast<T*>(y));
  } else {
    thread_per_channel_kernel<T, S><<<blocks, kChannelThreads, 0, stream>>>(in, state, static_cast<T*>(y));
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t ssm_state_step(const SsmStepOperands& in, float* state, void* y, cudaStream_t stream) {
  if (in.rows == 0 || in.channels == 0) return cudaSuccess;
  if (in.state < 1 || in.rows * in.channels * 32 > kMaxGridBlocks * kLaneThreads)
    return cudaErrorInvalidValue;  // no grid-stride loop in either layout
  return triax::kernels::dispatch_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (in.thread_per_channel) {
      if (in.state <= 4) return launch_channels<T, 4>(in, state, y, stream);
      if (in.state <= 8) return launch_channels<T, 8>(in, state, y, stream);
      return launch_channels<T, 16>(in, state, y, stream);  // state > 16 (rare in Mamba-1): passes of 16
    }
    if (in.state <= 4) return launch_lanes<T, 4>(in, state, y, stream);
    if (in.state <= 8) return launch_lanes<T, 8>(in, state, y, stream);
    if (in.state <= 16) return launch_lanes<T, 16>(in, state, y, stream);
    return launch_lanes<T, 32>(in, state, y, stream);
  });
}

bool ssm_state_step_vectorizes(const SsmStepOperands& in, const float* state) {
  if (!in.thread_per_channel || !in.vector_loads) return false;
  switch (in.dtype) {
    case Dtype::Float32:
      return vector_loads_apply<float>(in, state);
    case Dtype::BFloat16:
      return vector_loads_apply<__nv_bfloat16>(in, state);
    case Dtype::Float16:
      return vector_loads_apply<__half>(in, state);
  }
  return false;
}

}  // namespace triax::mamba::kernels
