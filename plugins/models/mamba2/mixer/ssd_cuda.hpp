// The CUDA side of the chunked SSD's intra-chunk step (ssd_cuda.cpp, built with -DTRIAX_CUDA=ON):
// the chunks' tensors shaped for the kernels of ssd_kernels.hpp (the intra-chunk mask, the state
// passing) and their launches. ssd_chunks.cpp
// and ssd_backward.cpp take them for CUDA chunks in fp32 (ssd_kernels_apply), the LibTorch
// composition otherwise (and with TRIAX_MAMBA2_SSD_KERNELS=0).
#pragma once

#include <ATen/core/Tensor.h>

#include "ssd_chunks.hpp"

namespace triax::mamba2::ssd {

bool ssd_kernels_apply(const Chunks& k);

// decay_mask(k) times the group's scores [b, c, g, q, q] (fp32), as [b, c, g, r, q, q] in k.operand.
at::Tensor masked_scores_cuda(const Chunks& k, const at::Tensor& scores);

// From d_masked [b, c, g, r, q, q] fp32, the gradient of the masked scores.
MaskedScoresGradients masked_scores_backward_cuda(const Chunks& k, const at::Tensor& d_masked,
                                                  const at::Tensor& scores);

PassedStates pass_states_cuda(const Chunks& k, const at::Tensor& initial_state, const at::Tensor& states);

struct PassingGradients {
  at::Tensor chunk_states;   // [b, c, g, r p, n]
  at::Tensor initial_state;  // [b, H, p, n]
  at::Tensor chunk_decay;    // [b, c, g, r], of each chunk's log-decay (the last cumulative one)
};

// From the forward's entering states, their gradient [b, c, g, r p, n] and the final state's
// [b, H, p, n] (undefined: zero).
PassingGradients pass_states_backward_cuda(const Chunks& k, const at::Tensor& entering, const at::Tensor& d_entering,
                                           const at::Tensor& d_final);

}  // namespace triax::mamba2::ssd
