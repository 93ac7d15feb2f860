// The LibTorch reference of the scan and the conv1d (reference_scan.cpp): what CPU and every
// non-kernel input run, and what the kernel tests compare against. Plain LibTorch ops, so
// autograd differentiates them; any device, any floating dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

#include "selective_scan.hpp"

namespace triax::mamba {

// Throws triax::Error (invalid argument) naming the operand when a shape or dtype is not the one
// selective_scan.hpp states.
void check_scan_args(const SelectiveScanArgs& args, const at::Tensor& initial_state);
void check_conv_args(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// y [b, d, l] in u's dtype and the state after the last position [b, d, n] (fp32, fp64 for fp64
// u). The state runs in fp32 (fp64) from initial_state (undefined = zeros); differentiable.
std::pair<at::Tensor, at::Tensor> selective_scan_reference(const SelectiveScanArgs& args,
                                                           const at::Tensor& initial_state);

// at::conv1d with groups = d over x padded with k-1 zeros on the left, then SiLU if silu.
at::Tensor causal_conv1d_reference(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu);

}  // namespace triax::mamba
