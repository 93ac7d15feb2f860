// The CUDA side of the SSD backward's elementwise passes (ssd_backward_cuda.cpp, built with
// -DTRIAX_CUDA=ON): the chunks' tensors shaped for the kernels of ssd_backward_kernels.hpp and
// their launches. ssd_backward.cpp takes them where ssd_backward_fused_applies, the LibTorch
// composition otherwise (the CPU's reference, the same math with its sums in another order).
#pragma once

#include <ATen/core/Tensor.h>

#include "ssd_chunks.hpp"

namespace triax::mamba2::ssd {

// TRIAX_MAMBA2_SSD_BACKWARD_FUSED not "0" (read at every call, so that one process can compare
// both paths), the fused kernels enabled, CUDA chunks in fp32 with operands in a kernel dtype, at
// most kernels::kMaxTermsPairs (position, head) pairs.
bool ssd_backward_fused_applies(const Chunks& k);

// The chunk states' backward from dweighted = d(xdt o w) [b, c, g, q, r, p] fp32 and w = to_end
// [b, c, g, r, q]: d_xdt ([b, c, g, q, r, p] fp32, a view such as a permuted head-major tensor
// included) += dweighted o w in place (replaced by a contiguous copy first if its channels are not
// adjacent); returns the gradient of log w, [b, c, g, r, q] fp32: w times the sum over p of
// dweighted o xdt.
at::Tensor chunk_states_terms_cuda(const Chunks& k, const at::Tensor& dweighted, const at::Tensor& to_end,
                                   at::Tensor& d_xdt);

struct ReadOutTerms {
  at::Tensor dread;  // dy o exp(decay), [b, c, g, q, r p] in the operand type
  at::Tensor decay;  // [b, c, g, r, q] fp32: exp(decay) times the sum over p of dy o read
};

// The read-out's backward from dy position-major [b, c, g, q, r, p] (fp32, bf16 or fp16; a view
// whose (r, p) are contiguous is read in place), from_start = exp(decay) [b, c, g, r, q] and
// read = C entering^T [b, c, g, q, r p] fp32.
ReadOutTerms read_out_terms_cuda(const Chunks& k, const at::Tensor& dy, const at::Tensor& from_start,
                                 const at::Tensor& read);

struct InputTerms {
  at::Tensor x;   // d_xdt dt [b, l, H, p] in x's type
  at::Tensor dt;  // sum over p of d_xdt o x, [b, l, H] fp32 (without the decays' term)
};

// x dt's gradient in the chunks' layout d_xdt [b, c, g, q, r, p] fp32 back to x [b, l, H, p]
// and dt (views of either with unit channel stride are read in place).
InputTerms input_terms_cuda(const Chunks& k, const at::Tensor& d_xdt, const at::Tensor& x);

}  // namespace triax::mamba2::ssd
