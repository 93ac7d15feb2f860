// The CUDA side of gated_norm.hpp (gated_norm_cuda.cpp, built with -DTRIAX_CUDA=ON): the
// operands shaped for the kernels of gated_norm_kernels.hpp, their launches, the gradients in
// each input's dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include "gated_norm.hpp"

namespace triax::mamba2 {

struct GatedNormOutputs {
  at::Tensor out;   // [b, l, H P]
  at::Tensor rstd;  // [b l, groups] fp32
};

struct GatedNormGradients {
  at::Tensor y, x, z, D, weight;  // each in its input's shape and dtype
};

bool gated_norm_cuda_takes(const GatedNormArgs& args, c10::ScalarType dtype);
// "v1", "v2" or "v3": the kernels a call with these operands runs (TRIAX_MAMBA2_GATED_NORM_KERNEL).
const char* gated_norm_cuda_kernel(const GatedNormArgs& args);
GatedNormOutputs gated_norm_forward_cuda(const GatedNormArgs& args);
// z_gradient (may be null): where the third backward runs, z's gradient is written into z's slot
// of it (in_proj_gradient.hpp) and returned as that view.
GatedNormGradients gated_norm_backward_cuda(const GatedNormArgs& args, const at::Tensor& rstd,
                                            const at::Tensor& grad_out, InProjGradient* z_gradient = nullptr);

}  // namespace triax::mamba2
