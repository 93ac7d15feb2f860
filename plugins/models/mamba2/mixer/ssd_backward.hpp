// The chunked SSD's backward, written out as matrix products: from the inputs alone (the chunk
// states, decays and scores are recomputed, not kept by the forward) and the gradients of y and
// of the final state, every input's gradient. Per chunk, head and group (ssd_chunks.hpp):
//   within a chunk, y = M xdt with M = L o (C B^T), L_ij = exp(decay_i - decay_j) (i >= j):
//     d xdt = M^T dy, dM = dy xdt^T, d(C B^T) = sum over the group's heads of dM o L,
//     d decay_i += sum_j G_ij - sum_j G_ji with G = dM o M;
//   each chunk's state S = (xdt o w)^T B, w_j = exp(decay_end - decay_j): d(xdt o w) = B dS^T,
//     dB += (xdt o w) dS;
//   across chunks, boundaries = T inputs (T the passing matrix): d inputs = T^T d boundaries,
//     the chunk decays' gradient from dT o T as within a chunk;
//   the read-out y_i = exp(decay_i) C_i E^T: dC += (exp(decay) o dy) E, dE = (exp(decay) o dy)^T C.
// Then x dt and dt A (cumulatively summed within each chunk) back to x, dt and A.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "ssd.hpp"

namespace triax::mamba2::ssd {

struct SsdGradients {
  at::Tensor x;               // in x's type (the product in the compute type, rounded once)
  at::Tensor dt, A, B, C;     // in the compute type (ssd_chunks.hpp)
  at::Tensor initial_state;   // undefined without an initial state
};

// Where the gradients of x, B and C go instead of SsdGradients: views (any strides, any float
// type) of one packed gradient, x's [b, l, G, R P], B's and C's [b, l, G, N]; each final sum is
// stored there in the pass that adds its last term. x_addend [b, l, H, P] (undefined: none) is
// added into x's.
struct GradientDestinations {
  at::Tensor x, B, C;
  at::Tensor x_addend;
};

// grad_y [b, l, H, P] and grad_final_state [b, H, P, N]; either may be undefined (zero). With
// `into`, the gradients of x, B and C are written there and left undefined in the result.
SsdGradients ssd_backward(const SsdInputs& in, int64_t chunk_size, const at::Tensor& grad_y,
                          const at::Tensor& grad_final_state, const GradientDestinations* into = nullptr);

}  // namespace triax::mamba2::ssd
