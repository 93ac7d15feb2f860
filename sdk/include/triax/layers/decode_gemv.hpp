// A decoding step's linear layers at batch <= 4 through the GEMV kernel (kernels::gemv, gemv.cu)
// instead of cuBLAS: at one row the product only reads the weights, and the kernel reads each
// weight row once in 16-byte vectors. On unless TRIAX_DECODE_GEMV=0 in the environment (read once),
// so that one build compares both; TRIAX_FUSED_KERNELS=0 turns it off too.
#pragma once

#include <ATen/core/Tensor.h>

namespace triax {

// x [..., in] times matrix [out, in] transposed, [..., out], through the kernel; an undefined
// tensor where the kernel does not apply (switched off, not CUDA, more than kernels::kGemvMaxRows
// rows, a gradient wanted, operands not contiguous, of other dtypes or misaligned): the caller's
// GEMM then runs.
at::Tensor decode_gemv(const at::Tensor& x, const at::Tensor& matrix);

}  // namespace triax
