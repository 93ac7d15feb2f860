// The SSD backward's elementwise passes over [b, c, g, q, r, p] values (ssd_backward_terms.cu),
// each fused into one kernel that reads its operands once: a per-value product scaled by one
// factor per (position, head), and the dot product over the head's p channels of two of its
// operands, which the decays' (or dt's) gradient takes. One group of lanes per (position, head)
// sums its channels in a fixed order (lane by lane, then a butterfly): the same bits on every run
// (16-byte loads where the operands allow, TRIAX_MAMBA2_SSD_TERMS_VECTOR; the .cu says when). Raw
// pointers, the caller's stream; no LibTorch header. All offsets in elements.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "triax/kernels/kernels.hpp"

namespace triax::mamba2::kernels {

struct TermsShape {
  int64_t batch, chunks, groups, heads, head_dim, positions, length;  // b, c, g, r, p, q, l
};

// The most (position, head) pairs, b c g q r, a launch takes (the kernels index them in int32);
// past it the launchers return cudaErrorInvalidValue.
constexpr int64_t kMaxTermsPairs = int64_t{1} << 30;

// An operand in the chunks' layout [b, c, g, q, r, p] as a view: unit channel stride, the other
// five dims at these strides (chunked_grad_y's dy, or a head-major [b, c, g, r, q, p] permuted).
struct ChunkedStrides {
  int64_t batch, chunk, group, position, head;
};

// The chunk states' backward, d(xdt o w) = dweighted [b, c, g, q, r, p] fp32 contiguous, with
// w = to_end [b, c, g, r, q] fp32 contiguous:
//   d_xdt[., i, h, :] += dweighted[., i, h, :] w[., h, i]   (fp32 at d_xdt_strides, in place)
//   dw[., h, i] = w[., h, i] sum_p dweighted[., i, h, p] xdt[., i, h, p]   ([b, c, g, r, q] fp32)
// xdt [b, c, g, q, r, p] contiguous in `operand`.
cudaError_t chunk_states_terms(triax::kernels::Dtype operand, const float* dweighted, const void* xdt,
                               const float* to_end, float* d_xdt, const ChunkedStrides& d_xdt_strides, float* dw,
                               const TermsShape& shape, cudaStream_t stream);

// The entering states' read-out backward from dy [b, c, g, q, r, p] in `dy_type` at dy_strides,
// from_start = exp(decay) [b, c, g, r, q] fp32 contiguous and read = C entering^T [b, c, g, q, r, p]
// fp32 contiguous:
//   dread[., i, h, :] = dy[., i, h, :] from_start[., h, i], stored in `operand` ([b, c, g, q, r, p])
//   d_decay[., h, i] = from_start[., h, i] sum_p dy[., i, h, p] read[., i, h, p]   (fp32)
cudaError_t read_out_terms(triax::kernels::Dtype dy_type, triax::kernels::Dtype operand, const void* dy,
                           const ChunkedStrides& dy_strides, const float* from_start, const float* read, void* dread,
                           float* d_decay, const TermsShape& shape, cudaStream_t stream);

// x [b, l, H, p] in `x_type` with unit channel stride (a strided view allowed).
struct InputStrides {
  int64_t batch, position, head;
};

// x dt back to x and dt, from d_xdt in the chunks' layout [b, c, g, q, r, p] fp32 at d_xdt_strides
// (positions past l skipped) and dt [b, l, H] fp32 contiguous:
//   dx[., t, H, :] = d_xdt dt[., t, H], stored in `x_type` ([b, l, H, p] contiguous)
//   d_dt[., t, H] = sum_p d_xdt x   (fp32 [b, l, H]; the caller adds the decays' term)
cudaError_t input_terms(triax::kernels::Dtype x_type, const float* d_xdt, const ChunkedStrides& d_xdt_strides,
                        const void* x, const InputStrides& x_strides, const float* dt, void* dx, float* d_dt,
                        const TermsShape& shape, cudaStream_t stream);

}  // namespace triax::mamba2::kernels
