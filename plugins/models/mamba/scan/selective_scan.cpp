// Dispatch of the scan and the conv1d: CUDA inputs the kernels take go through the autograd
// functions of cuda_scan.cpp (TRIAX_MAMBA_SCAN_KERNELS: -DTRIAX_CUDA=ON), all else the reference.
#include "selective_scan.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "reference_scan.hpp"

#ifdef TRIAX_MAMBA_SCAN_KERNELS
#include "cuda_scan.hpp"
#endif

namespace triax::mamba {

at::Tensor selective_scan(const SelectiveScanArgs& args) {
  check_scan_args(args, at::Tensor());
#ifdef TRIAX_MAMBA_SCAN_KERNELS
  if (scan_kernels_apply(args)) return selective_scan_cuda(args);
#endif
  return selective_scan_reference(args, at::Tensor()).first;
}

std::pair<at::Tensor, at::Tensor> selective_scan_with_state(const SelectiveScanArgs& args,
                                                            const at::Tensor& initial_state) {
  check_scan_args(args, initial_state);
  at::NoGradGuard no_grad;
#ifdef TRIAX_MAMBA_SCAN_KERNELS
  if (scan_kernels_apply(args)) return selective_scan_with_state_cuda(args, initial_state);
#endif
  auto [y, state] = selective_scan_reference(args, initial_state);
  return {y, state.to(at::kFloat)};
}

at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu) {
  check_conv_args(x, weight, bias);
#ifdef TRIAX_MAMBA_SCAN_KERNELS
  if (conv_kernels_apply(x, weight, bias)) return causal_conv1d_cuda(x, weight, bias, silu);
#endif
  return causal_conv1d_reference(x, weight, bias, silu);
}

}  // namespace triax::mamba
