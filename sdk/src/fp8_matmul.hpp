// The pieces of an fp8 matrix product (fp8_linear.cpp): quantising an operand with its scale,
// and the scaled product itself, on CUDA through at::_scaled_mm or emulated on the CPU.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/fp8_options.hpp"
#include "triax/layers/tensor_parallel.hpp"

namespace triax::fp8 {

// An fp8 matrix and the fp32 scale that dequantises it: value = data x scale. The scale is
// [1, 1] (tensorwise), [rows, 1] or [1, cols] (rowwise, along the other dimension). `transposed`
// holds data^T contiguous ([cols, rows]) when it was asked for; `data` may then be left undefined.
struct Fp8Matrix {
  at::Tensor data;
  at::Tensor scale;
  at::Tensor transposed;
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

// Which layouts of the fp8 matrix a caller needs (both come from one read where kernels apply).
enum class Layout { RowMajor, Transposed, Both };

// A scale (amax / largest of the format) and its multiplier (largest / amax), fp32, shaped as the amax.
struct ScaleAndMultiplier {
  at::Tensor scale, multiplier;
};

// The largest finite value of an fp8 format (448 for e4m3, 57344 for e5m2).
double largest_value(c10::ScalarType format);

// The smallest amax a scale is computed from: an all-zero tensor gets a finite scale.
constexpr double kAmaxFloor = 1e-12;

// The scales from amaxes of any shape (zero amaxes get a finite scale), all-reduced (MAX) over tp
// first where `scaling.across_tp` says the amax spans split dimensions.
ScaleAndMultiplier scales_from_amax(at::Tensor amax, const Scaling& scaling, const TensorParallel& tp);

// t [rows, cols] in any floating dtype -> its fp8 values and scale.
Fp8Matrix quantise(const at::Tensor& t, const Scaling& scaling, const TensorParallel& tp,
                   Layout layout = Layout::RowMajor);

// Whether cuBLASLt can read `t` where it lies: it reads the operands of a scaled product and
// their scales only from 16-byte aligned addresses, and at::_scaled_mm passes a view's address
// unchanged (a misaligned one fails the product with CUBLAS_STATUS_NOT_SUPPORTED).
bool aligned_for_cublaslt(const at::Tensor& t);

// a [M, K] x b [K, N] with their dequantising scales -> [M, N] in `out_dtype`. cuBLASLt reads a
// row-major and b column-major (both along K): operands given so cost nothing, others are copied.
// Throws when an operand or scale is not aligned for cuBLASLt (aligned_for_cublaslt).
// `fast_accumulation`: cuBLASLt's faster, less exact fp8 accumulation (the forward product, as
// torchao uses it).
at::Tensor scaled_matmul(const at::Tensor& a, const at::Tensor& a_scale, const at::Tensor& b, const at::Tensor& b_scale,
                         c10::ScalarType out_dtype, bool fast_accumulation);

// [rows, M] with zero columns appended up to a multiple of 16: grad_weight's contraction
// dimension is the token count, which cuBLASLt's fp8 kernels need in multiples of 16. The scales
// of the matrices padded (per tensor, or per row of this [rows, M] view) hold for the zeros.
at::Tensor pad_columns_to_16(const at::Tensor& fp8_rows);

// Throws when `device` is a CUDA device without fp8 tensor cores (compute capability < 8.9);
// `key` names the config key in the message.
void require_fp8_device(const c10::Device& device, const std::string& key);

}  // namespace triax::fp8
