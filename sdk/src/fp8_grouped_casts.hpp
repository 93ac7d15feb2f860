// The fp8 operands of the grouped products (fp8_grouped_linear.cpp), with rowwise scales along
// each product's contraction. On CUDA each is one fused cast (kernels/fp8_grouped_cast.cu) unless
// TRIAX_FP8_GROUPED_FUSED_CASTS=0 (read at every call), which keeps LibTorch's composition
// (fp8::quantise, reductions, a transposed copy, the weights concatenated): the same bytes and
// scales either way, so that one binary times both. The CPU always takes the composition.
#pragma once

#include <ATen/core/Tensor.h>

#include "fp8_matmul.hpp"
#include "triax/layers/fp8_grouped_linear.hpp"

namespace triax::grouped_fp8 {

// A group's rows come in whole blocks of 16 (Fp8RowGroups): the grouped kernel's 16-byte steps
// of e4m3 along the contraction.
constexpr int64_t kRowStep = 16;

// N of the weights stacked along it: `first`'s [E, N1, K] and `second`'s [E, N2, K] if defined.
inline int64_t stacked_features(const at::Tensor& first, const at::Tensor& second) {
  return first.size(1) + (second.defined() ? second.size(1) : 0);
}

// Whether the fused casts are switched on (TRIAX_FP8_GROUPED_FUSED_CASTS unless "0").
bool fused_casts_switched_on();

// How many casts in this process took the fused kernels (the tests' proof that they ran).
int64_t fused_casts_run();

// t [rows, cols] scaled per row (over cols): {data [rows, cols], scale [rows]}.
fp8::Fp8Matrix per_row(const at::Tensor& t);

// t [rows, C] scaled per column over each group's rows: {transposed [C, rows] row-major, scale
// [groups * C] group-major}.
fp8::Fp8Matrix per_group_column(const at::Tensor& t, const Fp8RowGroups& groups);

// The experts' weights first [E, N1, K] and, where defined, second [E, N2, K], stacked per expert
// along N (N = N1 + N2) without being concatenated in memory:
// for y = x W^T, per row over K: {data [E * N, K], scale [E * N]};
fp8::Fp8Matrix weights_per_row(const at::Tensor& first, const at::Tensor& second);
// for gx = gy W, per column over N, each expert transposed: {data [E * K, N] (W_e^T stacked),
// scale [E * K]}.
fp8::Fp8Matrix weights_per_column(const at::Tensor& first, const at::Tensor& second);

}  // namespace triax::grouped_fp8
