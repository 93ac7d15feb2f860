// The pieces of an fp8 matrix product (fp8_linear.cpp): quantising an operand with its scale,
// and the scaled product itself, on CUDA through at::_scaled_mm or emulated on the CPU.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/fp8_options.hpp"
#include "triax/layers/tensor_parallel.hpp"

namespace triax::fp8 {

// An fp8 matrix and the fp32 scale that dequantises it: value = data x scale. The scale is
// [1, 1] (tensorwise), [rows, 1] or [1, cols] (rowwise, along the other dimension).
struct Fp8Matrix {
  at::Tensor data;
  at::Tensor scale;
};

// How one operand is scaled.
struct Scaling {
  c10::ScalarType format = c10::ScalarType::Float8_e4m3fn;  // or Float8_e5m2 (tensorwise gradients)
  // -1: one scale for the whole tensor; 0 or 1: one scale per slice along this dimension, the
  // amax taken over it (the contraction dimension of the product the operand enters).
  int64_t amax_dim = -1;
  // The amax is all-reduced (MAX) over tp: the dimensions it spans are split over the ranks.
  bool across_tp = false;
};

// t [rows, cols] in any floating dtype -> its fp8 values and scale.
Fp8Matrix quantise(const at::Tensor& t, const Scaling& scaling, const TensorParallel& tp);

// a [M, K] x b [K, N] -> [M, N] in `out_dtype`. b's data may be in either layout (the CUDA
// path makes it column-major, as cuBLASLt needs); a's is made row-major. `fast_accumulation`:
// cuBLASLt's faster, less exact fp8 accumulation (the forward product, as torchao uses it).
at::Tensor scaled_matmul(const Fp8Matrix& a, const Fp8Matrix& b, c10::ScalarType out_dtype, bool fast_accumulation);

// A matrix with its rows padded by zero rows to a multiple of 16 (the contraction dimension of
// grad_weight is the token count, which cuBLASLt's fp8 kernels need in multiples of 16).
Fp8Matrix pad_rows_to_16(const Fp8Matrix& m);

// Throws when `device` is a CUDA device without fp8 tensor cores (compute capability < 8.9);
// `key` names the config key in the message.
void require_fp8_device(const c10::Device& device, const std::string& key);

}  // namespace triax::fp8
