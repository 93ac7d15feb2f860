// The fused AdamW kernel (adamw_kernel.hpp) called on LibTorch tensors. Compiled only with
// -DTRIAX_CUDA=ON (TRIAX_ADAMW_KERNEL).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "adamw_kernel.hpp"

namespace triax::plugins {

// One group's tensors: masters, moments and gradients pairwise of equal numel; rounded[i] the
// low-precision parameter (or shard) master i is rounded into, undefined where none.
struct AdamWGroupTensors {
  const std::vector<at::Tensor>& masters;
  const std::vector<at::Tensor>& exp_avg;
  const std::vector<at::Tensor>& exp_avg_sq;
  const std::vector<at::Tensor>& grads;
  const std::vector<at::Tensor>& rounded;
};

// Whether the kernel takes the group: the kernels are on, every tensor is contiguous on the
// masters' CUDA device, gradients and rounded copies in fp32, bf16 or fp16, grad_scale an fp32
// scalar there (or undefined).
bool adamw_kernel_applies(const AdamWGroupTensors& group, const at::Tensor& grad_scale);

// One launch per kind of gradient and rounded copy on the current stream.
void adamw_kernel_step(const AdamWGroupTensors& group, const at::Tensor& grad_scale,
                       const adamw_kernel::Scalars& scalars);

}  // namespace triax::plugins
