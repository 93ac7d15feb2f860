// The passes of scan_passes.hpp: the kernels' launches of cuda_scan.cpp where they apply
// (TRIAX_MAMBA_SCAN_KERNELS: -DTRIAX_CUDA=ON), else the reference, differentiated by autograd in
// the backward pass.
#include "scan_passes.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <vector>

#include "reference_scan.hpp"

#ifdef TRIAX_MAMBA_SCAN_KERNELS
#include "cuda_scan.hpp"
#endif

namespace triax::mamba {
namespace {

// The gradients of sum(grad_y * y) with respect to `operands` (undefined ones skipped, and
// given no gradient), y = run(fresh leaves of the operands) with autograd on.
template <typename Run>
std::vector<at::Tensor> reference_gradients(std::vector<at::Tensor> operands, const at::Tensor& grad_y,
                                            const Run& run) {
  std::vector<at::Tensor> leaves;
  for (at::Tensor& t : operands)
    if (t.defined()) {
      t = t.detach().requires_grad_(true);
      leaves.push_back(t);
    }
  at::Tensor y;
  {
    at::AutoGradMode grad_on(true);
    y = run(operands);
  }
  const std::vector<at::Tensor> leaf_grads = torch::autograd::grad({y}, leaves, {grad_y}, /*retain_graph=*/false,
                                                                   /*create_graph=*/false, /*allow_unused=*/true);
  std::vector<at::Tensor> grads(operands.size());
  for (size_t i = 0, leaf = 0; i < operands.size(); ++i)
    if (operands[i].defined()) grads[i] = leaf_grads[leaf++];
  return grads;
}

#ifdef TRIAX_MAMBA_SCAN_KERNELS
// The kernels' gradients (u's dtype or fp32) in their operands' dtypes.
at::Tensor in_dtype_of(const at::Tensor& gradient, const at::Tensor& operand) {
  return operand.defined() ? gradient.to(operand.scalar_type()) : at::Tensor();
}
#endif

}  // namespace

ScanForwardPass selective_scan_forward_pass(const SelectiveScanArgs& args) {
  check_scan_args(args, at::Tensor());
  at::NoGradGuard no_grad;
#ifdef TRIAX_MAMBA_SCAN_KERNELS
  if (scan_kernels_apply(args)) {
    ScanKernelForward forward = selective_scan_forward_kernel(args);
    return {forward.y, forward.checkpoints};
  }
#endif
  return {selective_scan_reference(args, at::Tensor()).first, at::Tensor()};
}

SelectiveScanGradients selective_scan_backward_pass(const SelectiveScanArgs& args, const at::Tensor& checkpoints,
                                                    const at::Tensor& grad_y) {
#ifndef TRIAX_MAMBA_SCAN_KERNELS
  (void)checkpoints;  // only the kernels write them
#else
  if (checkpoints.defined()) {  // the kernels ran the forward pass
    const SelectiveScanGradients g = selective_scan_backward_kernel(args, checkpoints, grad_y);
    return {in_dtype_of(g.u, args.u), in_dtype_of(g.delta, args.delta),
            in_dtype_of(g.A, args.A), in_dtype_of(g.B, args.B),
            in_dtype_of(g.C, args.C), in_dtype_of(g.D, args.D),
            in_dtype_of(g.z, args.z), in_dtype_of(g.delta_bias, args.delta_bias)};
  }
#endif
  const std::vector<at::Tensor> g =
      reference_gradients({args.u, args.delta, args.A, args.B, args.C, args.D, args.z, args.delta_bias}, grad_y,
                          [&](const std::vector<at::Tensor>& t) {
                            SelectiveScanArgs leaves = args;
                            leaves.u = t[0], leaves.delta = t[1], leaves.A = t[2], leaves.B = t[3], leaves.C = t[4],
                            leaves.D = t[5], leaves.z = t[6], leaves.delta_bias = t[7];
                            return selective_scan_reference(leaves, at::Tensor()).first;
                          });
  return {g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]};
}

at::Tensor causal_conv1d_forward_pass(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                      bool silu) {
  check_conv_args(x, weight, bias);
  at::NoGradGuard no_grad;
#ifdef TRIAX_MAMBA_SCAN_KERNELS
  if (conv_kernels_apply(x, weight, bias)) return causal_conv1d_forward_kernel(x, weight, bias, silu).y;
#endif
  return causal_conv1d_reference(x, weight, bias, silu);
}

CausalConv1dGradients causal_conv1d_backward_pass(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                                  bool silu, const at::Tensor& grad_y) {
#ifdef TRIAX_MAMBA_SCAN_KERNELS
  if (conv_kernels_apply(x, weight, bias)) {
    const CausalConv1dGradients g = causal_conv1d_backward_kernel(x, weight, bias, silu, grad_y);
    return {in_dtype_of(g.x, x), in_dtype_of(g.weight, weight), in_dtype_of(g.bias, bias)};
  }
#endif
  const std::vector<at::Tensor> g = reference_gradients(
      {x, weight, bias}, grad_y,
      [&](const std::vector<at::Tensor>& t) { return causal_conv1d_reference(t[0], t[1], t[2], silu); });
  return {g[0], g[1], g[2]};
}

}  // namespace triax::mamba
