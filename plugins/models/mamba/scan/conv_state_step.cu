// The conv half of a Mamba layer's decoding step (step_kernels.hpp): one thread per (row,
// channel) reads the channel's last width - 1 inputs and the new one, writes SiLU of the
// depthwise conv, and leaves the state shifted by one input. The taps are unrolled to the widest
// kernel, so the window stays in registers.
#include <cstdint>

#include "scan_common.cuh"
#include "step_kernels.hpp"

namespace triax::mamba::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWidest = static_cast<int>(kMaxConvWidth);

template <typename T>
__global__ void __launch_bounds__(kThreads) conv_state_step_kernel(ConvStepOperands in, T* __restrict__ u) {
  const int64_t unit = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // row * d + channel
  if (unit >= in.rows * in.channels) return;
  const int64_t row = unit / in.channels, channel = unit % in.channels;
  const int kept = static_cast<int>(in.width) - 1;
  T* state = static_cast<T*>(in.conv_state) + unit * kept;
  const T* weight = static_cast<const T*>(in.weight) + channel * in.width;
  const T fresh = static_cast<const T*>(in.x)[row * in.x_row_stride + channel];
  // The same sum, in the same order, as the sequence's conv (causal_conv1d.cu): bias, then the taps.
  float acc = in.bias ? to_float(static_cast<const T*>(in.bias)[channel]) : 0.f;
  T shifted[kWidest];
#pragma unroll
  for (int j = 0; j < kWidest; ++j) {
    if (j > kept) break;
    const T input = j < kept ? state[j] : fresh;
    acc += to_float(weight[j]) * to_float(input);
    if (j > 0) shifted[j - 1] = input;
  }
#pragma unroll
  for (int j = 0; j < kWidest - 1; ++j)
    if (j < kept) state[j] = shifted[j];
  u[unit] = from_float<T>(silu(acc));
}

}  // namespace

cudaError_t conv_state_step(const ConvStepOperands& in, void* u, cudaStream_t stream) {
  if (in.rows == 0 || in.channels == 0) return cudaSuccess;
  if (in.width < 1 || in.width > kMaxConvWidth || in.rows * in.channels > kMaxGridBlocks * kThreads)
    return cudaErrorInvalidValue;  // one (row, channel) per thread, no grid-stride loop
  return triax::kernels::dispatch_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    conv_state_step_kernel<T><<<triax::kernels::grid_for(in.rows * in.channels, kThreads, kMaxGridBlocks), kThreads,
                                0, stream>>>(in, static_cast<T*>(u));
    return cudaGetLastError();
  });
}

}  // namespace triax::mamba::kernels
