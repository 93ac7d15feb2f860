#include "ssd_backward.hpp"

#include <ATen/ATen.h>

#include "ssd_chunks.hpp"

#ifdef TRIAX_MAMBA2_KERNELS
#include "ssd_backward_cuda.hpp"
#include "ssd_chunk_states_cuda.hpp"
#include "ssd_cuda.hpp"
#endif

namespace triax::mamba2::ssd {
namespace {

void accumulate(at::Tensor& sum, const at::Tensor& term) {
  if (sum.defined())
    sum.add_(term);
  else
    sum = term;
}

// A gradient summed from terms with its last term held back: the final sum is either taken
// (value) or stored where it goes, in another type or layout, by the pass that adds that term.
class Summed {
 public:
  void add(const at::Tensor& term) {
    if (last_.defined()) accumulate(sum_, last_);
    last_ = term;
  }
  at::Tensor value() {
    accumulate(sum_, last_);
    last_ = at::Tensor();
    return sum_;
  }
  // `as` lays a term out as `out` (a view); the same values as value() cast to out's type.
  template <typename Layout>
  void store(at::Tensor out, Layout as) const {
    if (sum_.defined())
      at::add_out(out, as(sum_), as(last_));
    else
      out.copy_(as(last_));
  }

 private:
  at::Tensor sum_, last_;
};

// The gradients in the chunks' layout, summed over the four steps: each starts as its first term
// (no zero tensor filled and added to), so the steps add with accumulate() (Summed::add).
struct ChunkGradients {
  at::Tensor xdt;    // [b, c, g, q, r, p]
  at::Tensor decay;  // [b, c, g, r, q], of the cumulative log-decays
  Summed B, C;       // [b, c, g, q, n]
};

at::Tensor reverse_cumsum(const at::Tensor& t) { return t.flip(-1).cumsum(-1).flip(-1); }

// Within each chunk: y = M xdt per head. dy position-major [b, c, g, q, r, p]. The fused chunk
// scan's kernels where chunk_scan_backward_applies, else the masked scores' composition.
void diagonal_backward(const Chunks& k, const at::Tensor& dy_positions, ChunkGradients& grads) {
#ifdef TRIAX_MAMBA2_KERNELS
  if (chunk_scan_backward_applies(k)) {
    const ChunkScanGradients d = chunk_scan_backward_cuda(k, dy_positions);
    accumulate(grads.xdt, d.xdt);
    grads.C.add(product(d.scores, k.B, k.type));
    grads.B.add(product(d.scores.transpose(-1, -2), k.C, k.type));
    accumulate(grads.decay, d.decay);
    return;
  }
#endif
  const at::Tensor scores_of_group = scores(k);
  const at::Tensor x_heads = k.xdt.view({k.b, k.c, k.g, k.q, k.r, k.p}).permute({0, 1, 2, 4, 3, 5});
  const at::Tensor dy = dy_positions.permute({0, 1, 2, 4, 3, 5}).to(k.operand);
  const at::Tensor masked = masked_scores(k, scores_of_group);
  accumulate(grads.xdt, product(masked.transpose(-1, -2), dy, k.type).permute({0, 1, 2, 4, 3, 5}));
  const MaskedScoresGradients d = masked_scores_backward(k, product(dy, x_heads.transpose(-1, -2), k.type),
                                                         scores_of_group);
  grads.C.add(product(d.scores, k.B, k.type));
  grads.B.add(product(d.scores.transpose(-1, -2), k.C, k.type));
  accumulate(grads.decay, d.decay);
}

// The read-out of the entering states; returns their gradient [b, c, g, r p, n]. dy [b, c, g, q, r, p].
// passed.entering_operand: the entering states in the operand type if at hand (else cast here,
// once for both products). On CUDA dread and the decays' term in one kernel (ssd_backward_cuda.hpp).
at::Tensor read_out_backward(const Chunks& k, const at::Tensor& dy, const PassedStates& passed, ChunkGradients& grads) {
  const at::Tensor from_start = k.decay.exp();  // [b, c, g, r, q]
  const at::Tensor entering_operand =
      passed.entering_operand.defined() ? passed.entering_operand : passed.entering.to(k.operand);
  const at::Tensor read = read_out(k, entering_operand);  // [b, c, g, q, r p]
  at::Tensor dread;
#ifdef TRIAX_MAMBA2_KERNELS
  if (ssd_backward_fused_applies(k)) {
    ReadOutTerms terms = read_out_terms_cuda(k, dy, from_start, read);
    dread = terms.dread;
    accumulate(grads.decay, terms.decay);
  }
#endif
  if (!dread.defined()) {
    const at::Tensor factor = per_position(from_start);  // [b, c, g, q, r, 1]
    dread = product_stored_as(dy, factor, k.operand).view({k.b, k.c, k.g, k.q, k.r * k.p});
    const at::Tensor heads = read.view({k.b, k.c, k.g, k.q, k.r, k.p});
    accumulate(grads.decay, ((dy * heads).sum(-1) * factor.squeeze(-1)).transpose(3, 4));
  }
  grads.C.add(product(dread, entering_operand, k.type));
  return product(dread.transpose(-1, -2), k.C, k.type);
}

struct PassedGradients {
  at::Tensor chunk_states;  // [b, c, g, r p, n]
  at::Tensor initial_state;  // [b, H, p, n]
};

// Across chunks: boundaries = passing inputs. dentering [b, c, g, r p, n], dfinal [b, H, p, n] or undefined.
PassedGradients passing_backward(const Chunks& k, const at::Tensor& passing, const at::Tensor& inputs,
                                 const at::Tensor& dentering, const at::Tensor& dfinal, ChunkGradients& grads) {
  const at::Tensor entering = dentering.reshape({k.b, k.c, k.g, k.r, k.p * k.n}).permute({0, 2, 3, 1, 4});
  const at::Tensor last = dfinal.defined() ? dfinal.to(k.type).reshape({k.b, k.g, k.r, 1, k.p * k.n})
                                           : at::zeros({k.b, k.g, k.r, 1, k.p * k.n}, entering.options());
  const at::Tensor dboundaries = at::cat({entering, last}, 3);  // [b, g, r, c + 1, p n]
  const at::Tensor dinputs = at::matmul(passing.transpose(-1, -2), dboundaries);
  const at::Tensor g = at::matmul(dboundaries, inputs.transpose(-1, -2)).mul_(passing);
  // Entry (u, v) of the passing matrix is exp(s_u - s_v), s the cumulative chunk decays.
  const at::Tensor dchunk_decay = reverse_cumsum(g.sum(-1) - g.sum(-2)).narrow(-1, 1, k.c);  // [b, g, r, c]
  grads.decay.select(-1, k.q - 1).add_(dchunk_decay.permute({0, 3, 1, 2}));
  const at::Tensor states = dinputs.narrow(3, 1, k.c)
                                .reshape({k.b, k.g, k.r, k.c, k.p, k.n})
                                .permute({0, 3, 1, 2, 4, 5})
                                .reshape({k.b, k.c, k.g, k.r * k.p, k.n});
  return {states, dinputs.select(3, 0).reshape({k.b, k.g * k.r, k.p, k.n})};
}

// The gradient dw [b, c, g, r, q] of the weights' logs decay_end - decay_j into the decays'.
void add_to_end_gradient(const Chunks& k, const at::Tensor& dw, ChunkGradients& grads) {
  grads.decay.sub_(dw);  // defined: diagonal_backward ran first
  grads.decay.select(-1, k.q - 1).add_(dw.sum(-1));
}

// Each chunk's own state S = (xdt o w)^T B. dstates [b, c, g, r p, n]. Without xdt o w at hand
// (chunk_weights) the chunk states' kernels (ssd_chunk_states_cuda.hpp); else cuBLAS's products
// and, on CUDA, the update of d xdt and the weights' gradient in one kernel (ssd_backward_cuda.hpp).
void chunk_states_backward(const Chunks& k, const ChunkWeights& weights, const at::Tensor& dstates,
                           ChunkGradients& grads) {
#ifdef TRIAX_MAMBA2_KERNELS
  if (!weights.weighted.defined()) {
    const ChunkStatesGradients g = chunk_states_backward_cuda(k, weights.to_end, dstates, grads.xdt);
    grads.B.add(g.B);
    add_to_end_gradient(k, g.to_end, grads);
    return;
  }
#endif
  const at::Tensor ds = dstates.to(k.operand);  // no copy where the state passing stored it so
  grads.B.add(product(weights.weighted, ds, k.type));
  const at::Tensor dweighted = product(k.B, ds.transpose(-1, -2), k.type).view({k.b, k.c, k.g, k.q, k.r, k.p});
#ifdef TRIAX_MAMBA2_KERNELS
  if (ssd_backward_fused_applies(k)) {
    add_to_end_gradient(k, chunk_states_terms_cuda(k, dweighted, weights.to_end, grads.xdt), grads);
    return;
  }
#endif
  const at::Tensor w = per_position(weights.to_end);
  // On CUDA one pass (addcmul_); on CPU the product, then the sum: the reference's roundings.
  if (grads.xdt.is_cuda())
    grads.xdt.addcmul_(dweighted, w);  // defined: diagonal_backward ran first
  else
    grads.xdt.add_(dweighted * w);
  // xdt in the operand type, widened exactly inside the product (no copy in the compute type).
  const at::Tensor x = k.xdt.view({k.b, k.c, k.g, k.q, k.r, k.p});
  add_to_end_gradient(k, (dweighted * x).sum(-1).transpose(3, 4) * weights.to_end, grads);
}

// Across chunks and the entering states' read-out, the state passing's kernel where
// ssd_kernels_apply; returns the gradients of the chunks' own states and of the initial state.
PassedGradients across_chunks(const Chunks& k, const SsdInputs& in, const ChunkWeights& weights, const at::Tensor& dy,
                              const at::Tensor& dfinal, ChunkGradients& grads) {
  const at::Tensor states = chunk_states(k, weights);
#ifdef TRIAX_MAMBA2_KERNELS
  if (ssd_kernels_apply(k)) {
    const PassedStates passed = pass_states_cuda(k, in.initial_state, states, true);
    const at::Tensor dentering = read_out_backward(k, dy, passed, grads);
    const PassingGradients g = pass_states_backward_cuda(k, passed.entering, dentering, dfinal);
    grads.decay.select(-1, k.q - 1).add_(g.chunk_decay);
    return {g.chunk_states, g.initial_state};
  }
#endif
  const at::Tensor passing = passing_matrix(k);
  const at::Tensor inputs = boundary_inputs(k, in.initial_state, states);
  const at::Tensor entering = entering_states(k, boundary_states(passing, inputs));
  const at::Tensor dentering = read_out_backward(k, dy, PassedStates{entering, at::Tensor(), at::Tensor()}, grads);
  return passing_backward(k, passing, inputs, dentering, dfinal, grads);
}

// dy [b, l, H, p] or undefined -> position-major chunks [b, c, g, q, r, p]. A dy in the operand
// type (that of the fused chunk scan's y) stays so: the products widen it.
at::Tensor chunked_grad_y(const Chunks& k, const at::Tensor& grad_y) {
  at::Tensor dy = grad_y.defined() ? grad_y : at::zeros({k.b, k.l, k.g * k.r, k.p}, k.dt.options());
  if (dy.scalar_type() != k.operand) dy = dy.to(k.type);
  // constant_pad_nd copies even when nothing is padded.
  const at::Tensor padded = k.c * k.q == k.l ? dy : at::constant_pad_nd(dy, {0, 0, 0, 0, 0, k.c * k.q - k.l});
  return padded.reshape({k.b, k.c, k.q, k.g, k.r, k.p}).transpose(2, 3);
}

// x's gradient (in x's type) stored into `into`'s x: plus the addend in the same pass. On CUDA
// by the summed rows kernel (16-byte vectors into the strided slot, LibTorch's bits), whose
// LibTorch add went element by element.
void store_x(const Chunks& k, const at::Tensor& dx, const GradientDestinations& into) {
  auto grouped = [&](const at::Tensor& t) { return t.reshape({k.b, k.l, k.g, k.r * k.p}); };
  at::Tensor out = into.x;
  if (!into.x_addend.defined()) {
    out.copy_(grouped(dx));
    return;
  }
  const at::Tensor terms = grouped(dx), addend = grouped(into.x_addend);
#ifdef TRIAX_MAMBA2_KERNELS
  if (summed_rows_kernel_applies(out, terms, addend)) {
    summed_rows_cuda(out, terms, addend);
    return;
  }
#endif
  at::add_out(out, terms, addend);
}

// The chunk-layout gradients back to the inputs' (those of x, B and C into `into` where given).
SsdGradients to_inputs(const Chunks& k, const SsdInputs& in, ChunkGradients& grads, const GradientDestinations* into) {
  const at::Tensor da = reverse_cumsum(grads.decay)
                            .permute({0, 1, 4, 2, 3})
                            .reshape({k.b, k.c * k.q, k.g * k.r})
                            .narrow(1, 0, k.l);
  const at::Tensor A = in.A.to(k.type);
  auto positions = [&](const at::Tensor& t) {
    return t.transpose(2, 3).reshape({k.b, k.c * k.q, k.g, k.n}).narrow(1, 0, k.l);
  };
  SsdGradients out;
  at::Tensor dx;
#ifdef TRIAX_MAMBA2_KERNELS
  if (ssd_backward_fused_applies(k) && in.x.scalar_type() == k.operand) {  // x and dt's sum in one kernel
    InputTerms terms = input_terms_cuda(k, grads.xdt, in.x);
    dx = terms.x;
    out.dt = terms.dt.add_(da * A);
  }
#endif
  if (!dx.defined()) {
    const at::Tensor dxdt = from_chunks(k, grads.xdt);
    dx = product_stored_as(dxdt, k.dt.unsqueeze(-1), in.x.scalar_type());  // rounded once, as the cast did
    out.dt = (dxdt * in.x).sum(-1) + da * A;  // x widened exactly inside the product
  }
  out.A = (da * k.dt).sum(at::IntArrayRef{0, 1});
  if (into) {
    store_x(k, dx, *into);
    grads.B.store(into->B, positions);
    grads.C.store(into->C, positions);
  } else {
    out.x = dx;
    out.B = positions(grads.B.value());
    out.C = positions(grads.C.value());
  }
  return out;
}

}  // namespace

SsdGradients ssd_backward(const SsdInputs& in, int64_t chunk_size, const at::Tensor& grad_y,
                          const at::Tensor& grad_final_state, const GradientDestinations* into) {
  const Chunks k = into_chunks(in, chunk_size);
  ChunkGradients grads;
  const at::Tensor dy = chunked_grad_y(k, grad_y);
  diagonal_backward(k, dy, grads);
  const ChunkWeights weights = chunk_weights(k);
  const PassedGradients passed = across_chunks(k, in, weights, dy, grad_final_state, grads);
  chunk_states_backward(k, weights, passed.chunk_states, grads);
  SsdGradients out = to_inputs(k, in, grads, into);
  if (in.initial_state.defined()) out.initial_state = passed.initial_state;
  return out;
}

}  // namespace triax::mamba2::ssd
