// SwiGLU's backward written straight into the fp8 operands of the gate/up product's backward
// (docs/fp8.md, "SwiGLU's gradient in fp8"): where the fused gate/up projection is a tensorwise
// fp8 linear that nothing else reads, its output gradient is never written in the model's dtype.
// Its stand-in (quantised_stand_in.hpp) is quantised by two passes of SwiGLU's backward: the amax
// alone, then, with the scale the product's quantise would take from it, the gradient rounded to
// fp8 in both layouts (swiglu_fp8.cu). The bytes and scale are those of writing the gradient with
// its recorded amax and casting it. CUDA builds only (the callers are fused_ops.cpp's kernels').
#pragma once

#ifdef TRIAX_WITH_CUDA
#include <ATen/core/Tensor.h>

namespace triax {

// Whether the gradient of gate_up [..., 2 cols] (contiguous) for grad_y [..., cols] (contiguous)
// can be written in fp8 by the kernel: rows a multiple of 16, cols of 8, the operands 16-byte aligned.
bool swiglu_gradient_in_fp8_applies(const at::Tensor& gate_up, const at::Tensor& grad_y);

// The stand-in for that gradient (gate_up's shape and dtype) whose quantise, tensorwise in both
// layouts, writes it in fp8. It holds gate_up and grad_y until then.
at::Tensor swiglu_gradient_in_fp8(const at::Tensor& gate_up, const at::Tensor& grad_y);

}  // namespace triax
#endif
