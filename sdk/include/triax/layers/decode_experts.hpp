// A decoding step's MoE experts (kernels::gemv_by_expert, gemv.cu): row r of x through the
// matrices of its own expert, read where they lie in the experts' stacks. No grouping of the rows
// by expert on the host, so the step has no host synchronisation and can run as a CUDA graph; each
// expert's matrices are read once per row that chose it, which pays off only for a decoding step's
// few rows (the MoE block's rule: at most as many (token, slot) rows as experts).
#pragma once

#include <ATen/core/Tensor.h>

namespace triax {

// Row r of x [m, in] times stack[experts[r]] transposed ([E, out, in] -> [m, out]); experts int64
// [m] on x's device. On CUDA one kernel where it applies (whole 16-byte vectors along in, aligned
// operands), each warp summing as decode_gemv; elsewhere the batched product of the rows' matrices.
// An index outside [0, E) gives a row of zeros on CUDA and an error elsewhere.
at::Tensor decode_gemv_by_expert(const at::Tensor& x, const at::Tensor& stack, const at::Tensor& experts);

// SwiGLU experts' hidden rows: swiglu(row r times gate[e], row r times up[e]) for e = experts[r],
// with the bits of the two decode_gemv_by_expert products then swiglu, in one kernel on CUDA.
at::Tensor decode_swiglu_by_expert(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                                   const at::Tensor& experts);

}  // namespace triax
