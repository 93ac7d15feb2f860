// The CUDA side of the chunk states on tensor cores (ssd_chunk_states_cuda.cpp, built with
// -DTRIAX_CUDA=ON): the chunks' tensors shaped for the kernels of ssd_chunk_states_kernels.hpp and
// their launches. ssd_chunks.cpp (chunk_weights, chunk_states) and ssd_backward.cpp take them where
// chunk_states_kernel_applies; elsewhere xdt o w is stored (weighted_xdt) and cuBLAS multiplies it.
#pragma once

#include <ATen/core/Tensor.h>

#include "ssd_chunks.hpp"

namespace triax::mamba2::ssd {

// TRIAX_MAMBA2_CHUNK_STATES_KERNEL: "1" on; off otherwise (unset included: weighted_xdt and cuBLAS,
// as fast at the 780m shape on an H100); read at every call, so that one process can time both.
bool chunk_states_kernel_switched_on();

// Switched on, ssd_kernels_apply (CUDA, fp32 compute type), bf16 or fp16 operands and a shape the
// kernels take (kernels::chunk_states_supports: p and n 64 or 128, q a multiple of 64).
bool chunk_states_kernel_applies(const Chunks& k);

// Each chunk's own final state [b, c, g, r p, n] fp32 from xdt, w = to_end [b, c, g, r, q] and B:
// the products of chunk_states(k, weighted) (the same operands), summed in another order.
at::Tensor chunk_states_cuda(const Chunks& k, const at::Tensor& to_end);

struct ChunkStatesGradients {
  at::Tensor B;       // [b, c, g, q, n] fp32: sum over the heads of (xdt o w) d_states
  at::Tensor to_end;  // [b, c, g, r, q] fp32: w times the sum over p of (B d_states^T) o xdt
};

// The chunk states' backward from their gradient d_states [b, c, g, r p, n] (fp32 or the operand
// type: cast to it, as the cuBLAS path's product reads it); d_xdt ([b, c, g, q, r, p] fp32)
// += (B d_states^T) o w in place (replaced by a contiguous copy first where it is not contiguous).
ChunkStatesGradients chunk_states_backward_cuda(const Chunks& k, const at::Tensor& to_end, const at::Tensor& d_states,
                                                at::Tensor& d_xdt);

}  // namespace triax::mamba2::ssd
