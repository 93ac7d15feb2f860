// The fused AdamW step (adamw_kernel.cu): one pass over each parameter that reads its gradient in
// the dtype the host handed it over, applies the clipping coefficient, updates the fp32 master and
// both moments, and writes the master rounded into the low-precision parameter. LibTorch's fused
// kernel needs fp32 gradients already clipped and leaves the rounded copy to another pass.
//
// Plain pointers, no LibTorch header (as the SDK's triax/kernels/kernels.hpp). Compiled only with
// -DTRIAX_CUDA=ON.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "triax/kernels/kernels.hpp"

namespace triax::plugins::adamw_kernel {

// One parameter's operands: fp32 master and moments, its gradient, and where the rounded master
// goes (null when the master is the parameter). All contiguous, `numel` elements each.
struct Operands {
  float* master = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  const void* grad = nullptr;
  void* rounded = nullptr;
  int64_t numel = 0;
  // null, or kernels::kAmaxSlots zeroed fp32 where max |rounded| is folded (with a rounded copy
  // only): the weight's amax for its next fp8 cast (docs/fp8.md, "The amax from the producer").
  float* amax_slots = nullptr;
};

// One step's scalars (one weight-decay / learning-rate group), computed on the host.
struct Scalars {
  double learning_rate = 0, beta1 = 0, beta2 = 0, weight_decay = 0, eps = 0;
  float bias_correction1 = 1, bias_correction2_sqrt = 1;  // 1 - beta1^t, sqrt(1 - beta2^t)
};

// The AdamW update of every tensor in `operands`, LibTorch's fused kernel's formula, all in fp32
// (LibTorch blends the moments and decays in fp64; the results differ by under 1e-6 relative):
//   g = grad * scale (fp32);  p -= lr·wd·p;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²;
//   p -= (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps);  rounded = round(p)
// grad_dtype / rounded_dtype: the element types of every grad / rounded pointer; grad_scale: a
// device fp32 scalar, or null for 1.
cudaError_t fused_adamw(const Operands* operands, int count, kernels::Dtype grad_dtype, kernels::Dtype rounded_dtype,
                        const float* grad_scale, const Scalars& scalars, cudaStream_t stream);

}  // namespace triax::plugins::adamw_kernel
