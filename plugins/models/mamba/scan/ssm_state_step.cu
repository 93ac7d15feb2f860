// The SSM half of a Mamba layer's decoding step (step_kernels.hpp). L lanes share one (row,
// channel), L the state size rounded up to a power of two (4 to 32): lane g holds the states g,
// g + L, ..., so that a warp's state reads and writes are consecutive floats; the lanes' parts of
// C . h are summed by shuffles, and the channel's first lane writes y. With dt_proj folded in, the
// lanes share the channel's dot product of dt_proj's weight row and the row's dt the same way.
#include <cstdint>

#include "scan_common.cuh"
#include "step_kernels.hpp"

namespace triax::mamba::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ float element(const void* p, int64_t i) {
  return to_float(static_cast<const T*>(p)[i]);
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
__global__ void __launch_bounds__(kThreads) ssm_state_step_kernel(SsmStepOperands in, float* __restrict__ state,
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
      const float A = -expf(element<T>(in.A_log, channel * in.state + j));
      const float next = fast_exp2(dt * (A * kLog2e)) * h[j] + dt_u * element<T>(in.B, bc + j);
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

template <typename T, int L>
cudaError_t launch(const SsmStepOperands& in, float* state, void* y, cudaStream_t stream) {
  ssm_state_step_kernel<T, L><<<triax::kernels::grid_for(in.rows * in.channels * L, kThreads, kMaxGridBlocks),
                                kThreads, 0, stream>>>(in, state, static_cast<T*>(y));
  return cudaGetLastError();
}

}  // namespace

cudaError_t ssm_state_step(const SsmStepOperands& in, float* state, void* y, cudaStream_t stream) {
  if (in.rows == 0 || in.channels == 0) return cudaSuccess;
  if (in.state < 1 || in.rows * in.channels * 32 > kMaxGridBlocks * kThreads)
    return cudaErrorInvalidValue;  // L threads per (row, channel), no grid-stride loop
  return triax::kernels::dispatch_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (in.state <= 4) return launch<T, 4>(in, state, y, stream);
    if (in.state <= 8) return launch<T, 8>(in, state, y, stream);
    if (in.state <= 16) return launch<T, 16>(in, state, y, stream);
    return launch<T, 32>(in, state, y, stream);
  });
}

}  // namespace triax::mamba::kernels
