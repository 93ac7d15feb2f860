// The CUDA kernels of the mixer's gated norm (gated_norm.hpp), callable without LibTorch: raw
// pointers, the SDK's kernel dtypes, the caller's stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "triax/kernels/kernels.hpp"

namespace triax::mamba2::kernels {

using triax::kernels::Dtype;

// An operand laid out as [rows, groups, channels] with unit stride over the channels: the
// mixer's views of in_proj's and the convolution's outputs pass without a copy.
struct GroupedRows {
  const void* data;
  int64_t row_stride, group_stride;  // in elements
};

struct GatedNormShape {
  int64_t rows, groups, channels;  // channels: a group's, a multiple of head_dim
  int64_t head_dim;                // channels sharing one D
  float eps;
};

// The operands every launch reads. x and z of `dtype`; y of `dtype`, or fp32 with y_fp32 (the
// SSD's output); D [groups channels / head_dim] and weight [groups channels] in fp32.
struct GatedNormInputs {
  Dtype dtype;
  bool y_fp32;
  GroupedRows y, x, z;
  const float* D;
  const float* weight;
};

// out [rows, groups channels] contiguous, of `dtype`; rstd [rows, groups] fp32, kept for the backward.
cudaError_t gated_norm_forward(const GatedNormInputs& in, const GatedNormShape& shape, void* out, float* rstd,
                               cudaStream_t stream);

// How many rows of fp32 partial sums the backward writes for the weight's and D's gradients.
int64_t gated_norm_partial_rows(int64_t rows);

// grad_out [rows, groups channels] contiguous, of `dtype`. Writes grad_y (y's type), grad_x and
// grad_z (`dtype`), all contiguous [rows, groups channels], and per channel the partial sums
// [gated_norm_partial_rows(rows), groups channels] of the weight's gradient and of the D skip's
// (summed over a head's channels by the caller).
struct GatedNormGradients {
  void *y, *x, *z;
  float *weight_partials, *skip_partials;
  // grad_z's strides in elements as [rows, groups, channels]: z's own where its gradient lands in
  // in_proj's (in_proj_gradient.hpp); read by the third backward only (v1 and v2 need contiguous:
  // groups channels, channels).
  int64_t z_row_stride, z_group_stride;
};
cudaError_t gated_norm_backward(const GatedNormInputs& in, const GatedNormShape& shape, const void* grad_out,
                                const float* rstd, const GatedNormGradients& grads, cudaStream_t stream);

// The second generation (gated_norm_v2.cu), same operands and results: each input read once (a
// group's row held in registers between its reduction and its output), 16-byte vectors where the
// pointers and strides allow, a grid of a few blocks per SM each walking rows.
// Whether a group's row fits v2's registers (up to 1024 16-byte vectors of channels).
bool gated_norm_v2_fits(const GatedNormInputs& in, const GatedNormShape& shape);
// The rows of partial sums v2's backward writes on the current device (its blocks per group).
int64_t gated_norm_v2_partial_rows(const GatedNormInputs& in, const GatedNormShape& shape);
cudaError_t gated_norm_forward_v2(const GatedNormInputs& in, const GatedNormShape& shape, void* out, float* rstd,
                                  cudaStream_t stream);
cudaError_t gated_norm_backward_v2(const GatedNormInputs& in, const GatedNormShape& shape, const void* grad_out,
                                   const float* rstd, const GatedNormGradients& grads, cudaStream_t stream);

// The third backward (gated_norm_backward_v3.cu; runs after v2's forward), same operands and
// results: one 16-byte vector a thread (two past 3072 bf16 channels), the next row's inputs loaded
// while a row is summed and written. Only where every operand, grad_out and output included, is on
// whole 16-byte vectors; the partials of D's terms hold each vector's sum at its first channel.
// Whether the inputs are on whole vectors and a group's row fits (up to 768 vectors of channels).
bool gated_norm_backward_v3_fits(const GatedNormInputs& in, const GatedNormShape& shape);
// The rows of partial sums v3's backward writes on the current device (its blocks per group).
int64_t gated_norm_backward_v3_partial_rows(const GatedNormInputs& in, const GatedNormShape& shape);
// cudaErrorMisalignedAddress where grad_out or an output is not 16-byte aligned.
cudaError_t gated_norm_backward_v3(const GatedNormInputs& in, const GatedNormShape& shape, const void* grad_out,
                                   const float* rstd, const GatedNormGradients& grads, cudaStream_t stream);

}  // namespace triax::mamba2::kernels
