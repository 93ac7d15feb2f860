// A decoding step's RMSNorm folded into the product after it (kernels::norm_gemv, norm_gemv.cu):
// at batch <= 4 the kernel normalises the few rows itself (the residual add in front of the norm
// too) while the GEMV reads the weights, so the norm's own launch and its output's round trip
// through memory go. A decoder layer folds its input norm into the q/k/v product and its
// post-attention norm into the gate/up product: 6 launches a layer instead of 8. Off unless
// TRIAX_DECODE_NORM_GEMV=1 in the environment (read once); TRIAX_FUSED_KERNELS=0 or
// TRIAX_DECODE_GEMV=0 turn it off too.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/residual_stream.hpp"

namespace triax {

// What the product after the norm is.
enum class DecodeProduct {
  Plain,         // normed matrix^T, matrix [out, in]
  GateUpSwiglu,  // swiglu_halves(normed matrix^T), matrix [2n, in] (gate rows, then up rows)
};

// {the stream's sum (its residual where nothing is pending), the product of its norm}.
struct NormedProduct {
  at::Tensor sum;
  at::Tensor product;
};

// Whether TRIAX_DECODE_NORM_GEMV=1 (and the GEMV and fused kernels are not switched off).
bool decode_norm_gemv_switched_on();

// stream.residual (+ stream.pending) -> rms_norm(sum, norm_weight, eps) -> the product with
// `matrix`, with the bits of add_rms_norm (rms_norm) then decode_gemv (decode_gate_up_swiglu),
// in one kernel. Both members undefined where it does not apply (switched off, not CUDA, more than
// kDecodeGemvMaxRows rows, a gradient wanted, operands not contiguous, of other dtypes, misaligned
// or shaped otherwise, matrix undefined): the caller then runs the norm and the product itself.
NormedProduct decode_norm_gemv(const ResidualStream& stream, const at::Tensor& norm_weight, double eps,
                               const at::Tensor& matrix, DecodeProduct kind);

}  // namespace triax
