// The CUDA side of selective_scan.hpp (cuda_scan.cpp, built with -DTRIAX_CUDA=ON): which inputs
// the kernels take, and the autograd functions that run them.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

#include "selective_scan.hpp"

namespace triax::mamba {

// Every operand on one CUDA device, u of fp32/bf16 (fp16 too for the conv), n within the kernels' limit, and the
// fused kernels not switched off (TRIAX_FUSED_KERNELS=0).
bool scan_kernels_apply(const SelectiveScanArgs& args);
bool conv_kernels_apply(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

at::Tensor selective_scan_cuda(const SelectiveScanArgs& args);
std::pair<at::Tensor, at::Tensor> selective_scan_with_state_cuda(const SelectiveScanArgs& args,
                                                                 const at::Tensor& initial_state);
at::Tensor causal_conv1d_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu);

}  // namespace triax::mamba
