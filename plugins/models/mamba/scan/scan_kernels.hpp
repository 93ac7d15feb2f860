// Launchers of the Mamba scan's CUDA kernels (selective_scan_forward.cu, selective_scan_backward.cu,
// causal_conv1d.cu), called by cuda_scan.cpp. Plain pointers and sizes, no LibTorch header, as
// the SDK's kernels (triax/kernels/kernels.hpp). Every tensor is contiguous; the element type
// `dtype` is that of u, delta, z, B, C, y and of their gradients; A, D, delta_bias, the states and
// the parameter gradients are fp32. Every launcher returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "triax/kernels/kernels.hpp"  // triax::kernels::Dtype

namespace triax::mamba::kernels {

using triax::kernels::Dtype;

// The largest state size the scan kernels take, and their activation dtypes: fp32 and bf16
// (other inputs run the reference).
constexpr int64_t kMaxState = 32;
// The forward pass keeps the state before every kCheckpointInterval-th position for the backward
// pass, which walks the sequence back in pieces of that length recomputing the states within.
constexpr int64_t kCheckpointInterval = 32;
inline int64_t checkpoint_count(int64_t length) { return (length + kCheckpointInterval - 1) / kCheckpointInterval; }

struct ScanOperands {
  Dtype dtype;
  int64_t batch, channels, length, state;
  const void *u, *delta, *B, *C;  // [b, d, l], [b, d, l], [b, n, l], [b, n, l]
  const void* z;                  // [b, d, l] or null (no gate)
  const float* A;                 // [d, n]
  const float* D;                 // [d] or null (no skip)
  const float* delta_bias;        // [d] or null
  bool delta_softplus;
};

// y [b, d, l]; initial_state [b, d, n] or null (zeros); last_state [b, d, n] or null;
// checkpoints [b, d, checkpoint_count(l), n] or null: the state before positions 0, K, 2K, ...
cudaError_t selective_scan_forward(const ScanOperands& in, const float* initial_state, void* y, float* last_state,
                                   float* checkpoints, cudaStream_t stream);

struct ScanGradients {
  void *du, *ddelta;   // [b, d, l]
  void* dz;            // [b, d, l], or null without z
  float* dA;           // [d, n], zeroed by the caller (summed over the batch)
  float *dB, *dC;      // [b, n, l], zeroed by the caller (summed over channel tiles)
  float* dD;           // [d] or null, zeroed by the caller
  float* ddelta_bias;  // [d] or null, zeroed by the caller
};

// The backward kernel's variants, kept side by side so that one run can time them
// (mamba_scan_bench). kPositionRows: the block's dB and dC partial sums in shared memory a row
// per position (the sum over the block's warps reads them with 32-way bank conflicts);
// kStateRows: a row per state (conflict-free); kStateRowsFactored: that, with the adjoint's sums
// over the states factored (about two floating-point instructions fewer a (position, channel, state));
// kStoresAfterSpan: that, with the shared-memory stores of every 8 positions made after the
// last of them, so that no position's loads wait behind the previous position's stores (and the
// gate's and the gradient writes' elements in flight together); at n > 16 it runs
// kStateRowsFactored.
enum class ScanBackwardVariant { kPositionRows, kStateRows, kStateRowsFactored, kStoresAfterSpan };
constexpr ScanBackwardVariant kDefaultScanBackward = ScanBackwardVariant::kStoresAfterSpan;

// The gradients of sum(grad_y * y) from the forward's checkpoints (the scan starts from zeros).
cudaError_t selective_scan_backward(const ScanOperands& in, const float* checkpoints, const void* grad_y,
                                    const ScanGradients& out, cudaStream_t stream,
                                    ScanBackwardVariant variant = kDefaultScanBackward);

// The longest conv1d kernel the CUDA kernels take.
constexpr int64_t kMaxConvWidth = 8;

// y = conv(x) (+ bias) (then SiLU): x, y [b, d, l] of dtype; weight [d, k] fp32; bias [d] fp32 or null.
cudaError_t causal_conv1d_forward(Dtype dtype, const void* x, const float* weight, const float* bias, void* y,
                                  int64_t batch, int64_t channels, int64_t length, int64_t width, bool silu,
                                  cudaStream_t stream);

// grad_x [b, d, l] of dtype; grad_weight [d, k] and grad_bias [d] (or null) fp32, written whole.
cudaError_t causal_conv1d_backward(Dtype dtype, const void* x, const float* weight, const float* bias,
                                   const void* grad_y, void* grad_x, float* grad_weight, float* grad_bias,
                                   int64_t batch, int64_t channels, int64_t length, int64_t width, bool silu,
                                   cudaStream_t stream);

}  // namespace triax::mamba::kernels
