// Mamba-2's state-space dual (SSD) scan, chunked: the sequence is cut into chunks of chunk_size
// positions; within a chunk the output is a masked, decayed "attention" C.B over the chunk's
// positions, across chunks a small recurrence passes each chunk's final state on. Every step is a
// batched matrix product or an elementwise op (LibTorch ops), so the work is chunk-sized GEMMs
// instead of a loop over the tokens. One autograd function: it keeps only its inputs, and its
// backward (ssd_backward.hpp) recomputes the rest.
//
// Shapes: batch b, length l, heads H of head_dim P, groups G (H divisible by G; head h reads the
// B and C of group h / (H / G)), state N.
//   x [b, l, H, P], dt [b, l, H] (the step after softplus and limits), A [H] (negative),
//   B and C [b, l, G, N], initial_state [b, H, P, N] or undefined (zeros).
// The recurrence it computes, per head:  S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T,  y_t = S_t C_t.
// The D skip and the gate are the mixer's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace triax::mamba2 {

struct SsdInputs {
  at::Tensor x, dt, A, B, C;
  at::Tensor initial_state;  // optional
};

struct SsdOutputs {
  at::Tensor y;            // [b, l, H, P]
  at::Tensor final_state;  // [b, H, P, N], the state after the last position
};

// Arithmetic in fp32 (fp64 for fp64 inputs); outputs in that type, but for y where the fused
// chunk scan runs (CUDA, ssd_cuda.hpp): there y is in x's type (bf16, fp16; fp32 with
// TRIAX_MAMBA2_Y_IN_OPERAND_TYPE=0), and so is the gradient its backward reads. With bf16 (fp16) x,
// the chunk products take bf16 operands with fp32 accumulation (ssd_chunks.hpp). chunk_size > 0;
// the length need not be a multiple of it.
SsdOutputs ssd_chunked(const SsdInputs& inputs, int64_t chunk_size);

// The convolution's output taken whole: xBC [b, l, G, R P + 2 N] holds per group its R heads' x,
// then B, then C (the mixer's layout); dt [b, l, H], A [H], initial_state as above.
struct PackedSsdInputs {
  at::Tensor xBC, dt, A;
  at::Tensor initial_state;  // optional
  int64_t state_size = 0;    // N
};

struct PackedSsdOutputs {
  at::Tensor y, final_state;  // as SsdOutputs
  at::Tensor x;               // [b, l, H, P] from xBC, for the D skip: its gradient joins x's in the backward
};

// xBC's x [b, l, H, P] (a view where one group makes it one), B and C [b, l, G, N] as SsdInputs.
SsdInputs ssd_inputs_of(const PackedSsdInputs& inputs);

// ssd_chunked over xBC's x, B and C, with one difference in the backward: the gradients of x
// (plus that of the returned x), B and C are written into one gradient of xBC's shape, instead of
// three tensors that autograd adds to and joins with a cat.
PackedSsdOutputs ssd_chunked_packed(const PackedSsdInputs& inputs, int64_t chunk_size);

// TRIAX_MAMBA2_SSD_PACKED_GRADIENT: "0" off (the mixer takes ssd_chunked over ssd_inputs_of), on
// otherwise (unset included); read at every call, so that one process can time both.
bool packed_gradient_switched_on();

}  // namespace triax::mamba2
