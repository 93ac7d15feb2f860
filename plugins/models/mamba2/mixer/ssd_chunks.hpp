// The chunked SSD's pieces, shared by its forward (ssd.cpp) and its backward (ssd_backward.cpp),
// which recomputes them from the inputs instead of keeping them: the inputs cut into chunks, and
// the four steps of the forward (see ssd.hpp for the recurrence).
//
// Shapes: batch b, chunks c of q positions, groups g of r heads of p channels, state n.
// "Position-major" tensors hold a group's heads side by side per position, [b, c, g, q, r p], so
// that a product with B or C (shared by the group's heads) is one GEMM over all of them.
//
// Precision: decays and states in the compute type (fp32; fp64 for fp64 inputs). The chunk
// products take their operands in the operand type: bf16 (fp16) when x is bf16 (fp16), with fp32
// accumulation and fp32 results as tensor cores give them; the compute type otherwise.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "ssd.hpp"

namespace triax::mamba2::ssd {

struct Chunks {
  int64_t b, l, g, r, p, n, q, c;
  c10::ScalarType type;     // the compute type
  c10::ScalarType operand;  // the matrix products' operand type
  at::Tensor dt;            // [b, l, H] in the compute type
  at::Tensor xdt;           // x dt, position-major [b, c, g, q, r p], operand type
  at::Tensor B, C;          // [b, c, g, q, n], operand type
  at::Tensor decay;         // the within-chunk cumulative log-decays, [b, c, g, r, q], compute type
};

Chunks into_chunks(const SsdInputs& in, int64_t chunk_size);

// Batched a [..., m, k] times b [..., k, n] (the same leading sizes) with the compute type's
// accumulation, the result in the compute type.
at::Tensor product(const at::Tensor& a, const at::Tensor& b, c10::ScalarType type);

// a * b (broadcast) computed in the type they promote to and stored contiguous in `dtype`: one pass
// where (a * b).to(dtype) takes two, and the same values (a product rounded once).
at::Tensor product_stored_as(const at::Tensor& a, const at::Tensor& b, c10::ScalarType dtype);

// xdt weighted per position and head by w [b, c, g, q, r, 1] (compute type): [b, c, g, q, r p] in
// the operand type.
at::Tensor weighted_xdt(const Chunks& k, const at::Tensor& w);

// [b, c, g, r, q] -> [b, c, g, q, r, 1]: one factor per position and head, beside position-major values.
at::Tensor per_position(const at::Tensor& t);

// The decays within each chunk, [b, c, g, r, q, q]: exp(decay_i - decay_j) for i >= j, 0 above.
at::Tensor decay_mask(const Chunks& k);

// The scores C_i . B_j of each chunk and group, [b, c, g, q, q] in the compute type.
at::Tensor scores(const Chunks& k);

// decay_mask(k) times each head's group's `scores`, [b, c, g, r, q, q] in the operand type: one
// CUDA kernel where ssd_kernels_apply (ssd_cuda.hpp), no fp32 mask kept.
at::Tensor masked_scores(const Chunks& k, const at::Tensor& scores);

struct MaskedScoresGradients {
  at::Tensor scores;  // [b, c, g, q, q] in the operand type (the next products' operand)
  at::Tensor decay;   // [b, c, g, r, q] compute type, of the cumulative log-decays
};

// The backward of masked_scores from its output's gradient d_masked [b, c, g, r, q, q] (compute
// type; the composition overwrites it).
MaskedScoresGradients masked_scores_backward(const Chunks& k, at::Tensor d_masked, const at::Tensor& scores);

// exp(decay at the chunk's end - decay_j), [b, c, g, r, q]: position j's decay to the chunk's end.
at::Tensor to_chunk_end(const Chunks& k);

// The chunk states' weights w = to_chunk_end(k) and xdt o w = weighted_xdt(k, per_position(w)),
// which the chunk states and their backward both take. weighted stays undefined where the chunk
// states' CUDA kernels apply (ssd_chunk_states_cuda.hpp, TRIAX_MAMBA2_CHUNK_STATES_KERNEL): they
// scale xdt by w as they read it.
struct ChunkWeights {
  at::Tensor to_end, weighted;
};
ChunkWeights chunk_weights(const Chunks& k);

// Each chunk's own final state from its inputs alone, [b, c, g, r p, n] in the compute type.
at::Tensor chunk_states(const Chunks& k);
// The same from the weights at hand (the backward uses them again).
at::Tensor chunk_states(const Chunks& k, const ChunkWeights& weights);

// The decays between chunk boundaries: [b, g, r, c + 1, c + 1], entry (u, v) the decay from the
// start of chunk v to the start of chunk u (chunk c: the end), 0 for u < v.
at::Tensor passing_matrix(const Chunks& k);

// The initial state followed by the chunk states, [b, g, r, c + 1, p n].
at::Tensor boundary_inputs(const Chunks& k, const at::Tensor& initial_state, const at::Tensor& states);

// The state at each chunk boundary, [b, g, r, c + 1, p n]: entering chunk 0 .. c - 1, then the final state.
at::Tensor boundary_states(const at::Tensor& passing, const at::Tensor& inputs);

// The states entering each chunk, position-major [b, c, g, r p, n], from boundary_states.
at::Tensor entering_states(const Chunks& k, const at::Tensor& boundaries);

struct PassedStates {
  at::Tensor entering;          // [b, c, g, r p, n], as entering_states gives them
  at::Tensor final_state;       // [b, H, p, n]
  at::Tensor entering_operand;  // entering in the operand type where a kernel stored it too, else undefined
};

// The states across chunks from the initial state (undefined: zeros) and the chunks' own
// states [b, c, g, r p, n]: one CUDA kernel where ssd_kernels_apply, else the passing matrix's
// product (boundary_states).
PassedStates pass_states(const Chunks& k, const at::Tensor& initial_state, const at::Tensor& states);

// The entering states read out by C (before the decay from the chunk's start), [b, c, g, q, r p].
at::Tensor read_out(const Chunks& k, const at::Tensor& entering);

// [b, c, g, q, r, p] position-major per chunk -> [b, l, H, p].
at::Tensor from_chunks(const Chunks& k, const at::Tensor& t);

}  // namespace triax::mamba2::ssd
