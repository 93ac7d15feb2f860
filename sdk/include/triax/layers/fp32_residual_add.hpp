// The residual add after a layer that computes in a 16-bit dtype while its residual stream is kept
// in fp32 (Mamba's residual_in_fp32): out = residual + y in fp32.
#pragma once

#include <ATen/core/Tensor.h>

namespace triax {

// residual (fp32) + y (of residual's shape, any dtype), in fp32. On CUDA (y fp32, bf16 or fp16,
// fused kernels on) residual_add.cu's kernel, by 16-byte vectors: the bits of LibTorch's
// mixed-dtype add, whose kernel takes an element at a time; backward the gradient itself for
// residual and its cast to y's dtype for y, as autograd gives them. Elsewhere residual + y.
at::Tensor add_to_fp32_residual(const at::Tensor& residual, const at::Tensor& y);

}  // namespace triax
