#include "ssd_chunks.hpp"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <cmath>
#include <vector>

#ifdef TRIAX_MAMBA2_KERNELS
#include "ssd_chunk_states_cuda.hpp"
#include "ssd_cuda.hpp"
#endif

namespace triax::mamba2::ssd {
namespace {

// [b, l, ...] -> [b, chunks, q, ...], zeros after the end (dt 0 there: no decay, no input).
at::Tensor cut(const at::Tensor& t, int64_t chunks, int64_t q) {
  const int64_t pad = chunks * q - t.size(1);
  at::Tensor padded = t;
  if (pad > 0) {
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    shape[1] = pad;
    padded = at::cat({t, at::zeros(shape, t.options())}, 1);
  }
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape[1] = q;
  shape.insert(shape.begin() + 1, chunks);
  return padded.reshape(shape);
}

// [..., Q] log-decays -> [..., Q, Q]: entry (i, j) the sum of a over (j, i] for i >= j, -inf above
// the diagonal. Summing a masked copy instead of subtracting cumulative sums keeps many chunks
// exact: no large terms cancel. Used across chunks only, where Q is the number of chunks + 1.
at::Tensor segment_sum(const at::Tensor& a) {
  const int64_t q = a.size(-1);
  const at::TensorOptions bools = at::TensorOptions().dtype(at::kBool).device(a.device());
  const at::Tensor strictly_below = at::ones({q, q}, bools).tril(-1);
  std::vector<int64_t> expanded(a.sizes().begin(), a.sizes().end());
  expanded.push_back(q);
  const at::Tensor sums = a.unsqueeze(-1).expand(expanded).masked_fill(strictly_below.logical_not(), 0.0).cumsum(-2);
  return sums.masked_fill(at::ones({q, q}, bools).tril(0).logical_not(), -INFINITY);
}

// [b, l, ...] -> position-major chunks [b, c, g, q, ...] in the operand type, contiguous, in one
// pass (a cast and a layout change together).
at::Tensor chunked_operand(const Chunks& k, const at::Tensor& t) {
  return cut(t, k.c, k.q).transpose(2, 3).to(k.operand, false, false, at::MemoryFormat::Contiguous);
}

// x dt position-major [b, c, g, q, r p] in the operand type. Without padding one pass: the product
// in the compute type (x's values widened exactly), rounded once as it is stored into the chunks'
// layout, the same values as the product's copy cast afterwards, without x's fp32 copy.
at::Tensor chunked_xdt(const Chunks& k, const at::Tensor& x) {
  if (k.c * k.q != k.l) return chunked_operand(k, (x.to(k.type) * k.dt.unsqueeze(-1)).reshape({k.b, k.l, k.g, -1}));
  const at::Tensor out = at::empty({k.b, k.c, k.g, k.q, k.r * k.p}, x.options().dtype(k.operand));
  at::Tensor positions = out.view({k.b, k.c, k.g, k.q, k.r, k.p}).transpose(2, 3);  // [b, c, q, g, r, p]
  const at::Tensor rows = x.reshape({k.b, k.c, k.q, k.g, k.r, k.p}), dt = k.dt.reshape({k.b, k.c, k.q, k.g, k.r, 1});
#ifdef TRIAX_MAMBA2_KERNELS
  if (x.scalar_type() == k.operand && scaled_rows_kernel_applies(rows, dt)) {
    scaled_rows_cuda(positions, rows, dt);
    return out;
  }
#endif
  at::mul_out(positions, rows, dt);
  return out;
}

// dt A per position and head as [b, c, g, r, q], stored in that layout where no padding comes
// first: the cumulative sum then runs along contiguous values (CUDA's would copy a permuted view).
at::Tensor log_decay_steps(const Chunks& k, const at::Tensor& A) {
  if (k.c * k.q != k.l) return cut((k.dt * A).reshape({k.b, k.l, k.g, k.r}), k.c, k.q).permute({0, 1, 3, 4, 2});
  const at::Tensor out = at::empty({k.b, k.c, k.g, k.r, k.q}, k.dt.options());
  at::Tensor positions = out.permute({0, 1, 4, 2, 3});  // [b, c, q, g, r], dt's order
  at::mul_out(positions, k.dt.reshape({k.b, k.c, k.q, k.g, k.r}), A.reshape({k.g, k.r}));
  return out;
}

}  // namespace

Chunks into_chunks(const SsdInputs& in, int64_t chunk_size) {
  Chunks k;
  k.b = in.x.size(0), k.l = in.x.size(1), k.p = in.x.size(3), k.g = in.B.size(2), k.n = in.B.size(3);
  k.r = in.x.size(2) / k.g, k.q = chunk_size, k.c = (k.l + k.q - 1) / k.q;
  k.type = at::promote_types(in.x.scalar_type(), at::kFloat);
  k.operand = at::isReducedFloatingType(in.x.scalar_type()) ? in.x.scalar_type() : k.type;
  k.dt = in.dt.to(k.type);
  k.xdt = chunked_xdt(k, in.x);
  k.B = chunked_operand(k, in.B);
  k.C = chunked_operand(k, in.C);
  k.decay = log_decay_steps(k, in.A.to(k.type)).cumsum(-1);
  return k;
}

at::Tensor product(const at::Tensor& a, const at::Tensor& b, c10::ScalarType type) {
  if (a.is_cuda() && a.scalar_type() != type) {  // bf16 operands on tensor cores, fp32 out
    std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 1);
    shape.push_back(b.size(-1));
    return at::bmm(a.reshape({-1, a.size(-2), a.size(-1)}), b.reshape({-1, b.size(-2), b.size(-1)}), type)
        .view(shape);
  }
  return at::matmul(a.to(type), b.to(type));
}

at::Tensor product_stored_as(const at::Tensor& a, const at::Tensor& b, c10::ScalarType dtype) {
  at::Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), a.options().dtype(dtype));
  return at::mul_out(out, a, b);
}

at::Tensor weighted_xdt(const Chunks& k, const at::Tensor& w) {
  const at::Tensor heads = k.xdt.view({k.b, k.c, k.g, k.q, k.r, k.p});
#ifdef TRIAX_MAMBA2_KERNELS
  if (heads.scalar_type() == k.operand && scaled_rows_kernel_applies(heads, w)) {
    const at::Tensor out = at::empty({k.b, k.c, k.g, k.q, k.r * k.p}, heads.options());
    scaled_rows_cuda(out.view({k.b, k.c, k.g, k.q, k.r, k.p}), heads, w);
    return out;
  }
#endif
  return product_stored_as(heads, w, k.operand).view({k.b, k.c, k.g, k.q, k.r * k.p});
}

at::Tensor per_position(const at::Tensor& t) { return t.transpose(3, 4).unsqueeze(-1); }

at::Tensor decay_mask(const Chunks& k) {
  const at::Tensor above = at::ones({k.q, k.q}, k.decay.options().dtype(at::kBool)).triu(1);
  return (k.decay.unsqueeze(-1) - k.decay.unsqueeze(-2)).masked_fill_(above, -INFINITY).exp_();
}

at::Tensor scores(const Chunks& k) { return product(k.C, k.B.transpose(-1, -2), k.type); }

at::Tensor masked_scores(const Chunks& k, const at::Tensor& scores) {
#ifdef TRIAX_MAMBA2_KERNELS
  if (ssd_kernels_apply(k)) return masked_scores_cuda(k, scores);
#endif
  return decay_mask(k).mul_(scores.unsqueeze(3)).to(k.operand);
}

MaskedScoresGradients masked_scores_backward(const Chunks& k, at::Tensor d_masked, const at::Tensor& scores) {
#ifdef TRIAX_MAMBA2_KERNELS
  if (ssd_kernels_apply(k)) return masked_scores_backward_cuda(k, d_masked, scores);
#endif
  const at::Tensor weighted = d_masked.mul_(decay_mask(k));  // dM o L
  const at::Tensor dscores = weighted.sum(3).to(k.operand);
  const at::Tensor g = weighted.mul_(scores.unsqueeze(3));  // dM o M
  return {dscores, g.sum(-1) - g.sum(-2)};
}

at::Tensor to_chunk_end(const Chunks& k) { return at::exp(k.decay.narrow(-1, k.q - 1, 1) - k.decay); }

ChunkWeights chunk_weights(const Chunks& k) {
  const at::Tensor to_end = to_chunk_end(k);
#ifdef TRIAX_MAMBA2_KERNELS
  if (chunk_states_kernel_applies(k)) return {to_end, at::Tensor()};
#endif
  return {to_end, weighted_xdt(k, per_position(to_end))};
}

at::Tensor chunk_states(const Chunks& k) { return chunk_states(k, chunk_weights(k)); }

at::Tensor chunk_states(const Chunks& k, const ChunkWeights& weights) {
#ifdef TRIAX_MAMBA2_KERNELS
  if (!weights.weighted.defined()) return chunk_states_cuda(k, weights.to_end);
#endif
  return product(weights.weighted.transpose(-1, -2), k.B, k.type);
}

at::Tensor passing_matrix(const Chunks& k) {
  const at::Tensor chunk_decay = k.decay.select(-1, k.q - 1).permute({0, 2, 3, 1});  // [b, g, r, c]
  return at::exp(segment_sum(at::constant_pad_nd(chunk_decay, {1, 0})));
}

at::Tensor boundary_inputs(const Chunks& k, const at::Tensor& initial_state, const at::Tensor& states) {
  const at::Tensor initial = initial_state.defined()
                                 ? initial_state.to(k.type).reshape({k.b, 1, k.g, k.r, k.p, k.n})
                                 : at::zeros({k.b, 1, k.g, k.r, k.p, k.n}, states.options());
  return at::cat({initial, states.reshape({k.b, k.c, k.g, k.r, k.p, k.n})}, 1)
      .permute({0, 2, 3, 1, 4, 5})
      .reshape({k.b, k.g, k.r, k.c + 1, k.p * k.n});
}

at::Tensor boundary_states(const at::Tensor& passing, const at::Tensor& inputs) { return at::matmul(passing, inputs); }

at::Tensor entering_states(const Chunks& k, const at::Tensor& boundaries) {
  return boundaries.narrow(3, 0, k.c)
      .reshape({k.b, k.g, k.r, k.c, k.p, k.n})
      .permute({0, 3, 1, 2, 4, 5})
      .reshape({k.b, k.c, k.g, k.r * k.p, k.n});
}

PassedStates pass_states(const Chunks& k, const at::Tensor& initial_state, const at::Tensor& states) {
#ifdef TRIAX_MAMBA2_KERNELS
  if (ssd_kernels_apply(k)) return pass_states_cuda(k, initial_state, states);
#endif
  const at::Tensor boundaries = boundary_states(passing_matrix(k), boundary_inputs(k, initial_state, states));
  // The final state copied out: a view would keep every boundary state alive.
  return {entering_states(k, boundaries), boundaries.select(3, k.c).reshape({k.b, k.g * k.r, k.p, k.n}).clone()};
}

at::Tensor read_out(const Chunks& k, const at::Tensor& entering) {
  return product(k.C, entering.to(k.operand).transpose(-1, -2), k.type);
}

at::Tensor from_chunks(const Chunks& k, const at::Tensor& t) {
  return t.permute({0, 1, 3, 2, 4, 5}).reshape({k.b, k.c * k.q, k.g * k.r, k.p}).narrow(1, 0, k.l);
}

}  // namespace triax::mamba2::ssd
