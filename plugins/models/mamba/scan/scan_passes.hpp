// The scan and the conv1d of selective_scan.hpp as a forward pass and a backward pass of their
// own, outside autograd: for an autograd function that holds a larger part of a layer and keeps
// less for its backward than the two differentiable ops would (the Mamba-1 mixer's inner part,
// ../mamba_inner.hpp, which runs the conv's forward again rather than keep its output).
//
// Where the CUDA kernels apply (cuda_scan.hpp) these are the kernels' launches: the scan's forward
// keeps its state checkpoints, its backward starts from them. Elsewhere (CPU, fp64, the kernels
// switched off) the forward runs the LibTorch reference without a graph and the backward runs it
// again with one, then backpropagates through it: the same gradients as the differentiable ops,
// bit for bit.
#pragma once

#include <ATen/core/Tensor.h>

#include "selective_scan.hpp"

namespace triax::mamba {

// The gradient of each operand, in its dtype; undefined where the operand is.
struct SelectiveScanGradients {
  at::Tensor u, delta, A, B, C, D, z, delta_bias;
};
struct CausalConv1dGradients {
  at::Tensor x, weight, bias;
};

// y, and what the backward pass needs besides the operands: the kernels' state before every
// kernels::kCheckpointInterval-th position, [b, d, ceil(l / 32), n] fp32; undefined where the
// reference ran (its backward runs it again).
struct ScanForwardPass {
  at::Tensor y, checkpoints;
};

ScanForwardPass selective_scan_forward_pass(const SelectiveScanArgs& args);
// The gradients of sum(grad_y * y), from the operands of the forward pass and its checkpoints.
SelectiveScanGradients selective_scan_backward_pass(const SelectiveScanArgs& args, const at::Tensor& checkpoints,
                                                    const at::Tensor& grad_y);

// causal_conv1d's output without a graph, and the gradients of sum(grad_y * y) from its operands.
at::Tensor causal_conv1d_forward_pass(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu);
CausalConv1dGradients causal_conv1d_backward_pass(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                                  bool silu, const at::Tensor& grad_y);

}  // namespace triax::mamba
