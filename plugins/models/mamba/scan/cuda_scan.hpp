// The CUDA side of selective_scan.hpp and scan_passes.hpp (cuda_scan.cpp, built with
// -DTRIAX_CUDA=ON): which inputs the kernels take, the kernels' launches as plain functions, and the
// autograd functions that run them.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

#include "scan_passes.hpp"
#include "selective_scan.hpp"

namespace triax::mamba {

// Every operand on one CUDA device, u of fp32/bf16 (fp16 too for the conv), n within the kernels' limit, and the
// fused kernels not switched off (TRIAX_FUSED_KERNELS=0).
bool scan_kernels_apply(const SelectiveScanArgs& args);
bool conv_kernels_apply(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The launches, outside autograd. Each takes its operands in any dtype and layout and reads them in
// the kernels' form: the activations contiguous in u's (x's) dtype, the parameters fp32 and
// contiguous; operands already in that form pass through uncopied. Gradients come in the kernels'
// dtypes: du, d(delta), dz and the conv's dx in the activations' dtype, the others fp32.
//
// The scan's forward keeping its state checkpoints ([b, d, ceil(l / 32), n] fp32), and the
// operands as the kernels read them (what an autograd function keeps for the backward).
struct ScanKernelForward {
  SelectiveScanArgs operands;
  at::Tensor y, checkpoints;
};
ScanKernelForward selective_scan_forward_kernel(const SelectiveScanArgs& args);
// The scan's backward from the forward's checkpoints: the gradients of sum(grad_y * y).
SelectiveScanGradients selective_scan_backward_kernel(const SelectiveScanArgs& args, const at::Tensor& checkpoints,
                                                      const at::Tensor& grad_y);
// The conv's forward, and its operands as the kernels read them.
struct ConvKernelForward {
  at::Tensor x, weight, bias;
  at::Tensor y;
};
ConvKernelForward causal_conv1d_forward_kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                               bool silu);
CausalConv1dGradients causal_conv1d_backward_kernel(const at::Tensor& x, const at::Tensor& weight,
                                                    const at::Tensor& bias, bool silu, const at::Tensor& grad_y);

// The differentiable ops of selective_scan.hpp on the kernels.
at::Tensor selective_scan_cuda(const SelectiveScanArgs& args);
std::pair<at::Tensor, at::Tensor> selective_scan_with_state_cuda(const SelectiveScanArgs& args,
                                                                 const at::Tensor& initial_state);
at::Tensor causal_conv1d_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu);

}  // namespace triax::mamba
