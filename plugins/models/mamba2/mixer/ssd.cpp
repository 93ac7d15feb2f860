#include "ssd.hpp"

#include <ATen/ATen.h>

#include "triax/error.hpp"

namespace triax::mamba2 {
namespace {

// [..., Q] log-decays -> [..., Q, Q]: entry (i, j) the sum of a over (j, i] for i >= j, -inf above
// the diagonal. Summing a masked copy instead of subtracting cumulative sums keeps long chunks
// exact: no large terms cancel.
at::Tensor segment_sum(const at::Tensor& a) {
  const int64_t q = a.size(-1);
  const at::TensorOptions bools = at::TensorOptions().dtype(at::kBool).device(a.device());
  const at::Tensor strictly_below = at::ones({q, q}, bools).tril(-1);
  std::vector<int64_t> expanded(a.sizes().begin(), a.sizes().end());
  expanded.push_back(q);
  const at::Tensor sums = a.unsqueeze(-1).expand(expanded).masked_fill(strictly_below.logical_not(), 0.0).cumsum(-2);
  return sums.masked_fill(at::ones({q, q}, bools).tril(0).logical_not(), -INFINITY);
}

// [b, l, ...] -> [b, chunks, q, ...], zeros after the end (dt 0 there: no decay, no input).
at::Tensor into_chunks(const at::Tensor& t, int64_t chunks, int64_t q) {
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

void check_inputs(const SsdInputs& in, int64_t chunk_size) {
  if (chunk_size <= 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "ssd_chunked: chunk_size must be positive, got " +
                                                  std::to_string(chunk_size));
  if (in.x.dim() != 4 || in.dt.dim() != 3 || in.A.dim() != 1 || in.B.dim() != 4 || in.C.dim() != 4)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "ssd_chunked: expected x [b, l, H, P], dt [b, l, H], A [H], "
                                              "B and C [b, l, G, N]");
  const int64_t heads = in.x.size(2), groups = in.B.size(2);
  if (in.dt.sizes() != in.x.sizes().slice(0, 3) || in.A.size(0) != heads || in.B.sizes() != in.C.sizes() ||
      in.B.size(0) != in.x.size(0) || in.B.size(1) != in.x.size(1) || heads % groups != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "ssd_chunked: inconsistent shapes of x, dt, A, B and C "
                                              "(or heads not divisible by groups)");
}

}  // namespace

SsdOutputs ssd_chunked(const SsdInputs& in, int64_t chunk_size) {
  check_inputs(in, chunk_size);
  const c10::ScalarType type = at::promote_types(in.x.scalar_type(), at::kFloat);
  const int64_t b = in.x.size(0), l = in.x.size(1), heads = in.x.size(2), p = in.x.size(3);
  const int64_t g = in.B.size(2), n = in.B.size(3), r = heads / g;
  const int64_t q = chunk_size, chunks = (l + q - 1) / q;

  const at::Tensor dt = in.dt.to(type);
  // Heads as [groups, heads per group], so B and C are used per group, never copied per head.
  const at::Tensor xdt = into_chunks((in.x.to(type) * dt.unsqueeze(-1)).reshape({b, l, g, r, p}), chunks, q)
                             .permute({0, 1, 3, 4, 2, 5});                                     // [b, c, g, r, q, p]
  const at::Tensor a = into_chunks((dt * in.A.to(type)).reshape({b, l, g, r}), chunks, q)
                           .permute({0, 1, 3, 4, 2});                                          // [b, c, g, r, q]
  const at::Tensor B = into_chunks(in.B.to(type), chunks, q).permute({0, 1, 3, 2, 4});        // [b, c, g, q, n]
  const at::Tensor C = into_chunks(in.C.to(type), chunks, q).permute({0, 1, 3, 2, 4});        // [b, c, g, q, n]
  const at::Tensor a_cumsum = a.cumsum(-1);                                                   // [b, c, g, r, q]

  // 1. Within each chunk: y_i = sum_{j <= i} exp(a_{j+1} + ... + a_i) (C_i . B_j) x_j dt_j.
  const at::Tensor scores = at::matmul(C, B.transpose(-1, -2)).unsqueeze(3);  // [b, c, g, 1, q, q]
  const at::Tensor y_diag = at::matmul(scores * at::exp(segment_sum(a)), xdt);  // [b, c, g, r, q, p]

  // 2. Each chunk's own final state: its inputs decayed to the chunk's end. [b, c, g, r, p, n]
  const at::Tensor to_end = at::exp(a_cumsum.narrow(-1, q - 1, 1) - a_cumsum).unsqueeze(-1);  // [b, c, g, r, q, 1]
  const at::Tensor chunk_states = at::matmul((xdt * to_end).transpose(-1, -2), B.unsqueeze(3));

  // 3. Across chunks: the state entering chunk c is sum_{z < c} (decay from z's end to c's start)
  // state_z, the initial state counting as chunk -1; one [chunks + 1]^2 product per head.
  at::Tensor initial = in.initial_state.defined() ? in.initial_state.to(type).reshape({b, 1, g, r, p, n})
                                                  : at::zeros({b, 1, g, r, p, n}, chunk_states.options());
  const at::Tensor states = at::cat({initial, chunk_states}, 1).permute({0, 2, 3, 1, 4, 5})
                                .reshape({b, g, r, chunks + 1, p * n});
  const at::Tensor chunk_decay = a_cumsum.select(-1, q - 1).permute({0, 2, 3, 1});  // [b, g, r, c]
  const at::Tensor passing = at::exp(segment_sum(at::constant_pad_nd(chunk_decay, {1, 0})));  // [b, g, r, c+1, c+1]
  const at::Tensor passed = at::matmul(passing, states).reshape({b, g, r, chunks + 1, p, n});
  const at::Tensor entering = passed.narrow(3, 0, chunks).permute({0, 3, 1, 2, 4, 5});  // [b, c, g, r, p, n]

  // 4. The entering state read out by C, decayed from the chunk's start to each position.
  const at::Tensor y_off = at::matmul(C.unsqueeze(3), entering.transpose(-1, -2)) * at::exp(a_cumsum).unsqueeze(-1);

  const at::Tensor y = (y_diag + y_off).permute({0, 1, 4, 2, 3, 5}).reshape({b, chunks * q, heads, p}).narrow(1, 0, l);
  return {y, passed.select(3, chunks).reshape({b, heads, p, n})};
}

}  // namespace triax::mamba2
