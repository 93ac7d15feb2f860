// The CUDA side of the chunked SSD's intra-chunk step (ssd_cuda.cpp, built with -DTRIAX_CUDA=ON):
// the chunks' tensors shaped for the kernels of ssd_kernels.hpp (the intra-chunk mask, the state
// passing, the fused chunk scan) and of scaled_rows.hpp (x dt, weighted), and their launches.
// ssd_chunks.cpp, ssd.cpp and ssd_backward.cpp take them for CUDA chunks in fp32
// (ssd_kernels_apply), the LibTorch composition otherwise (and with TRIAX_MAMBA2_SSD_KERNELS=0).
#pragma once

#include <ATen/core/Tensor.h>

#include "ssd_chunks.hpp"

namespace triax::mamba2::ssd {

bool ssd_kernels_apply(const Chunks& k);

// TRIAX_MAMBA2_CHUNK_SCAN: "0" off, otherwise on (unset included). Read at every call (once per SSD
// forward), so that one process can compare both paths.
bool chunk_scan_switched_on();

// TRIAX_MAMBA2_CHUNK_SCAN_KERNEL, read at every call: by default the fused chunk scan's third generation,
// on mma.sync with the products' tiles in registers, for the forward (kernels::chunk_scan_v3) and the
// backward's columns and scores kernels (kernels::chunk_scan_columns_v3, chunk_scan_scores_v3);
// "v3-columns" the forward's and the columns kernel's (the WMMA scores kernel); "v3-forward" the
// forward's alone; "v2" the WMMA kernels.
bool chunk_scan_v3_switched_on();
bool chunk_scan_columns_v3_switched_on();
bool chunk_scan_scores_v3_switched_on();

// Whether the forward takes chunk_scan_cuda: switched on, ssd_kernels_apply, bf16 or fp16
// operands and a shape the kernel takes (kernels::chunk_scan_supports).
bool chunk_scan_applies(const Chunks& k);

// TRIAX_MAMBA2_Y_IN_OPERAND_TYPE: "0" off, otherwise on (unset included); read at every call. On,
// chunk_scan_cuda writes y in the operand type (bf16, fp16): half the bytes written, read by the
// gated norm, kept for its backward, and in the gradient dy the backward reads.
bool y_in_operand_type_switched_on();

// The forward's output y [b, l, H, p] in one kernel from the chunks and the states entering them
// [b, c, g, r p, n] (pass_states): no masked scores in global memory. y in k.operand (the fp32
// accumulators rounded once) where y_in_operand_type_switched_on, else fp32.
at::Tensor chunk_scan_cuda(const Chunks& k, const at::Tensor& entering);

// Whether the backward takes chunk_scan_backward_cuda: chunk_scan_applies, and
// TRIAX_MAMBA2_CHUNK_SCAN_BACKWARD not "0" (to time, or rule out, the backward's kernels alone).
bool chunk_scan_backward_applies(const Chunks& k);

struct ChunkScanGradients {
  at::Tensor xdt;     // [b, c, g, q, r, p] fp32
  at::Tensor decay;   // [b, c, g, r, q] fp32, of the cumulative log-decays
  at::Tensor scores;  // [b, c, g, q, q] in the operand type: C's gradient is scores B, B's scores^T C
};

// The backward through the intra-chunk term from dy position-major [b, c, g, q, r, p] (any
// float type; one in the operand type read in place where the view is contiguous): the kernels
// of ssd_chunk_scan_columns.cu and ssd_chunk_scan_scores.cu, no [b, c, g, r, q, q] tensor.
ChunkScanGradients chunk_scan_backward_cuda(const Chunks& k, const at::Tensor& dy);

// decay_mask(k) times the group's scores [b, c, g, q, q] (fp32), as [b, c, g, r, q, q] in k.operand.
at::Tensor masked_scores_cuda(const Chunks& k, const at::Tensor& scores);

// From d_masked [b, c, g, r, q, q] fp32, the gradient of the masked scores.
MaskedScoresGradients masked_scores_backward_cuda(const Chunks& k, const at::Tensor& d_masked,
                                                  const at::Tensor& scores);

// TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE: "0" off, on otherwise (unset included), read at every call;
// it gained 1.2% of the 780m step on an H100. On, for bf16 (fp16) operands the state passing's
// kernels store what the backward's products read in that type: the entering states' copy
// (pass_states_cuda asked for it) and the chunk states' gradient, instead of fp32 tensors cast by
// a copy each. The same roundings (round to nearest even of the same fp32 values): the same bits.
bool states_in_operand_type_switched_on();

// With_operand_copy: the entering states in the operand type as well (entering_operand), where
// states_in_operand_type_switched_on and the operand type is not fp32.
PassedStates pass_states_cuda(const Chunks& k, const at::Tensor& initial_state, const at::Tensor& states,
                              bool with_operand_copy = false);

struct PassingGradients {
  at::Tensor chunk_states;   // [b, c, g, r p, n], fp32 or (states_in_operand_type_switched_on) the operand type
  at::Tensor initial_state;  // [b, H, p, n]
  at::Tensor chunk_decay;    // [b, c, g, r], of each chunk's log-decay (the last cumulative one)
};

// From the forward's entering states, their gradient [b, c, g, r p, n] and the final state's
// [b, H, p, n] (undefined: zero).
PassingGradients pass_states_backward_cuda(const Chunks& k, const at::Tensor& entering, const at::Tensor& d_entering,
                                           const at::Tensor& d_final);

// Whether the scaled rows kernel (scaled_rows.hpp) takes in [d0, .., d4, p] times scale
// [d0, .., d4, 1]: unless TRIAX_MAMBA2_SCALED_ROWS_KERNEL=0 (read at every call: one process can
// compare both paths), the fused kernels enabled, in on CUDA in a kernel dtype with its rows'
// values adjacent, 16-byte aligned, p and its row strides multiples of kernels::kScaledRowsVector,
// scale fp32 with exactly in's row dims, at least one and fewer than 2^31 vectors of values. chunked_xdt and
// weighted_xdt (ssd_chunks.cpp) take it.
bool scaled_rows_kernel_applies(const at::Tensor& in, const at::Tensor& scale);

// out = in * scale by the kernel where scaled_rows_kernel_applies(in, scale): the fp32 product
// rounded once into out (in's sizes and type, its rows' values adjacent, row strides multiples of
// kernels::kScaledRowsVector: a permuted view such as the chunks' layout is written in place),
// the same bits as at::mul_out(out, in, scale).
void scaled_rows_cuda(const at::Tensor& out, const at::Tensor& in, const at::Tensor& scale);

// Whether the summed rows kernel (scaled_rows.hpp) takes out = a + b: unless
// TRIAX_MAMBA2_SUMMED_ROWS_KERNEL=0 (read at every call), the fused kernels enabled, the three on
// one CUDA device in one kernel dtype with the same sizes, at most kScaledRowsDims + 1 dims, unit
// stride along the last, which with every other stride is a multiple of kernels::kScaledRowsVector,
// 16-byte aligned, fewer than 2^31 vectors. The packed SSD gradient's store of x's (ssd_backward.cpp)
// takes it: out a slot of a wider tensor, which LibTorch's add writes element by element.
bool summed_rows_kernel_applies(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b);

// out = a + b by the kernel where summed_rows_kernel_applies: the same bits as at::add_out(out, a, b).
void summed_rows_cuda(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b);

}  // namespace triax::mamba2::ssd
