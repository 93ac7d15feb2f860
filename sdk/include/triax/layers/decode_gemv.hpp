// A decoding step's linear layers at batch <= 4 through the GEMV kernel (kernels::gemv, gemv.cu)
// instead of cuBLAS: at one row the product only reads the weights, and the kernel reads each
// weight row once in 16-byte vectors. On unless TRIAX_DECODE_GEMV=0 in the environment (read once),
// so that one build compares both; TRIAX_FUSED_KERNELS=0 turns it off too. With
// TRIAX_DECODE_GEMV_PDL=1 (off by default) the same products launch through norm_gemv.cu's kernel
// with programmatic dependent launch: each may start while the kernel before it ends.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>

namespace triax {

// The most rows (tokens of a step) the kernel takes: kernels::kGemvMaxRows.
constexpr int64_t kDecodeGemvMaxRows = 4;

// Whether autograd would record an op of these operands (grad mode on and a defined one requires
// its gradient): the decoding step's kernels then leave the op to LibTorch.
bool wants_gradient(std::initializer_list<const at::Tensor*> operands);

// Whether TRIAX_DECODE_GEMV_PDL=1 (read once): the decoding step's GEMV kernels, decode_norm_gemv's
// too, launch with programmatic stream serialization.
bool decode_gemv_programmatic_launch();

// x [..., in] times matrix [out, in] transposed, [..., out], through the kernel; an undefined
// tensor where the kernel does not apply (switched off, not CUDA, more than kDecodeGemvMaxRows
// rows, a gradient wanted, operands not contiguous, of other dtypes or misaligned): the caller's
// GEMM then runs.
at::Tensor decode_gemv(const at::Tensor& x, const at::Tensor& matrix);

// SwiGLU of a fused gate/up projection at a decoding step's size: swiglu_halves(x matrix^T) for
// matrix [2n, in] (n gate rows, then n up rows), [..., n]. Where decode_gemv applies, one kernel
// (kernels::gemv_swiglu) with the bits of the two ops, one launch and one round trip through memory
// fewer; elsewhere the two ops (at::linear, swiglu_halves). A fused op: its RecordFunction range
// "triax::decode_gate_up_swiglu" counts once in a step's op count. Undefined where a gradient is
// wanted or x has more than kDecodeGemvMaxRows rows: the caller runs the two ops itself.
at::Tensor decode_gate_up_swiglu(const at::Tensor& x, const at::Tensor& matrix);

}  // namespace triax
