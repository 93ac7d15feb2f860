// The causal depthwise conv1d (+ SiLU) of the Mamba-2 mixer read and written token-major,
// [b, l, channels] with unit channel stride (token_major_conv.cu), so that in_proj's output feeds
// it as a strided view and its output feeds the scan and the gated norm without a transposing
// copy either way. The same arithmetic as Mamba-1's channel-major kernels
// (mamba/scan/causal_conv1d.cu): y[t] = bias + sum_j w[j] x[t - (k - 1) + j], zeros before the
// start, in fp32. Raw pointers, the caller's stream; no LibTorch header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "triax/kernels/kernels.hpp"

namespace triax::mamba2::kernels {

// The input's layout, element offsets: (b, t, c) at data[b batch_stride + t position_stride +
// (c / group_channels) group_stride + c % group_channels] (in_proj's output split per group).
struct TokenMajorInput {
  const void* data;
  int64_t batch_stride, position_stride, group_stride, group_channels;
};

// Where the backward writes grad_x, addressed as TokenMajorInput addresses x: contiguous
// [b, l, channels], or x's own layout in in_proj's output's gradient (in_proj_gradient.hpp).
struct TokenMajorGradient {
  void* data;
  int64_t batch_stride, position_stride, group_stride, group_channels;
};

struct TokenMajorConvShape {
  int64_t batch, length, channels, width;  // width: the taps, at most kMaxTokenMajorConvWidth
};

constexpr int64_t kMaxTokenMajorConvWidth = 8;

// How a thread's inputs arrive (token_major_conv.cu): loaded as each position is reached, or
// staged several positions ahead in shared memory (16-byte vector layouts only; others load
// directly). The same arithmetic: the same bits.
enum class TokenMajorConvLoads { kDirect, kStaged };

// y [b, l, channels] contiguous; weight [channels, width] fp32; bias [channels] fp32 or null.
cudaError_t token_major_conv_forward(triax::kernels::Dtype dtype, const TokenMajorInput& x, const float* weight,
                                     const float* bias, void* y, const TokenMajorConvShape& shape, bool silu,
                                     TokenMajorConvLoads loads, cudaStream_t stream);

// Rows of the backward's partial sums: one per block of positions of each batch row.
int64_t token_major_conv_partial_rows(const TokenMajorConvShape& shape);

// grad_y [b, l, channels] contiguous, grad_x as laid out. partials [token_major_conv_partial_rows, channels,
// width + 1] fp32, written whole: each block's sums of the weight's gradient (width) and the
// bias's (last); the caller sums them over the rows (a fixed order: the same result every run).
cudaError_t token_major_conv_backward(triax::kernels::Dtype dtype, const TokenMajorInput& x, const float* weight,
                                      const float* bias, const void* grad_y, const TokenMajorGradient& grad_x,
                                      float* partials, const TokenMajorConvShape& shape, bool silu,
                                      TokenMajorConvLoads loads, cudaStream_t stream);

}  // namespace triax::mamba2::kernels
