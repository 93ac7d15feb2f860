// Launchers of a Mamba layer's decoding-step kernels (conv_state_step.cu, ssm_state_step.cu): one
// new token per row continues the row's conv and SSM states, which the kernels update in place, so
// that a step reads and writes the same addresses every time (what a CUDA graph of it holds).
// Plain pointers and sizes, as scan_kernels.hpp. The activations, the conv state and the layer's
// parameters are of one dtype `dtype`; the SSM state is fp32. Every launcher returns the launch's
// error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "scan_kernels.hpp"  // Dtype, kMaxConvWidth

namespace triax::mamba::kernels {

struct ConvStepOperands {
  Dtype dtype;
  int64_t rows, channels, width;  // width: the conv's taps, at most kMaxConvWidth
  const void* x;                  // [rows, d], the new inputs; x_row_stride elements between rows
  int64_t x_row_stride;
  void* conv_state;    // [rows, d, width - 1]: each channel's last inputs, oldest first; shifted in place
  const void* weight;  // [d, width]
  const void* bias;    // [d] or null
};

// u [rows, d] = SiLU(bias + sum_j weight[:, j] * window[j]), the window being the state's inputs
// followed by x; the state then drops its oldest input and takes x.
cudaError_t conv_state_step(const ConvStepOperands& in, void* u, cudaStream_t stream);

struct SsmStepOperands {
  Dtype dtype;
  int64_t rows, channels, state;
  const void *u, *delta;  // [rows, d] contiguous; delta before its bias, or null with dt_proj_weight
  const void* z;          // [rows, d] with z_row_stride elements between rows, or null (no gate)
  int64_t z_row_stride;
  const void *B, *C;  // [rows, n] each, bc_row_stride elements between rows
  int64_t bc_row_stride;
  const void* A_log;       // [d, n]: A = -exp(A_log)
  const void* D;           // [d] or null (no skip)
  const void* delta_bias;  // [d] or null
  // With dt_proj_weight (delta null): delta = dt_proj_weight @ dt[row], the dt_proj product folded
  // into the step (rounded to dtype, as the product's output would be). dt: [rows, dt_rank] with
  // dt_row_stride elements between rows (x_proj's output); dt_proj_weight: [d, dt_rank].
  const void* dt = nullptr;
  int64_t dt_row_stride = 0, dt_rank = 0;
  const void* dt_proj_weight = nullptr;
  // The kernel's layout (ssm_state_step.cu): one thread per (row, channel) instead of a lane per
  // state; the caller picks it by the rows (decode_step.cpp).
  bool thread_per_channel = false;
  // The thread-per-channel layout's 16-byte loads and stores where every pointer and stride allows
  // (else its scalar loads); the same bits either way (TRIAX_MAMBA_SSM_STEP_VECTOR, decode_step.cpp).
  bool vector_loads = false;
};

// dt = softplus(delta + delta_bias); h = exp(dt A) h + dt B u; y = (C . h + D u) SiLU(z):
// state [rows, d, n] fp32 updated in place, y [rows, d] contiguous.
cudaError_t ssm_state_step(const SsmStepOperands& in, float* state, void* y, cudaStream_t stream);

// Whether ssm_state_step(in, state, ...) runs the thread-per-channel layout's 16-byte vectors: both
// flags set and every pointer and stride they read 16-byte aligned (else it takes scalar loads).
bool ssm_state_step_vectorizes(const SsmStepOperands& in, const float* state);

}  // namespace triax::mamba::kernels
