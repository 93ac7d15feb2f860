#include "ssd.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <vector>

#include "ssd_backward.hpp"
#include "ssd_chunks.hpp"
#include "triax/environment_switch.hpp"
#include "triax/error.hpp"

#ifdef TRIAX_MAMBA2_KERNELS
#include "ssd_cuda.hpp"
#endif

namespace triax::mamba2 {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

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

SsdOutputs forward_values(const SsdInputs& in, int64_t chunk_size) {
  const ssd::Chunks k = ssd::into_chunks(in, chunk_size);
#ifdef TRIAX_MAMBA2_KERNELS
  if (ssd::chunk_scan_applies(k)) {  // steps 2 and 3, then 1 and 4 in one kernel (y maybe in x's type)
    const ssd::PassedStates passed = ssd::pass_states(k, in.initial_state, ssd::chunk_states(k));
    return {ssd::chunk_scan_cuda(k, passed.entering), passed.final_state};
  }
#endif
  // 1. Within each chunk: y_i = sum_{j <= i} exp(decay_i - decay_j) (C_i . B_j) x_j dt_j, per head.
  const at::Tensor masked = ssd::masked_scores(k, ssd::scores(k));
  const at::Tensor x_heads = k.xdt.view({k.b, k.c, k.g, k.q, k.r, k.p}).permute({0, 1, 2, 4, 3, 5});
  const at::Tensor diagonal = ssd::product(masked, x_heads, k.type).permute({0, 1, 2, 4, 3, 5});
  // 2. and 3. Each chunk's own final state, then the states at the chunk boundaries.
  const ssd::PassedStates passed = ssd::pass_states(k, in.initial_state, ssd::chunk_states(k));
  // 4. The entering state read out by C, decayed from the chunk's start to each position.
  const at::Tensor off = ssd::read_out(k, passed.entering).view({k.b, k.c, k.g, k.q, k.r, k.p}) *
                         ssd::per_position(k.decay.exp());
  return {ssd::from_chunks(k, diagonal + off), passed.final_state};
}

// An autograd function takes no undefined input: no initial state travels as an empty tensor.
at::Tensor given(const at::Tensor& initial_state) { return initial_state.numel() > 0 ? initial_state : at::Tensor(); }

at::Tensor initial_gradient(const SsdInputs& in, const ssd::SsdGradients& g) {
  return in.initial_state.defined() ? g.initial_state.to(in.initial_state.scalar_type()) : at::Tensor();
}

// Keeps only its inputs for the backward, which recomputes the rest (ssd_backward.hpp): the
// [chunk, chunk] tensors of every layer would otherwise live until the backward.
class SsdFunction : public torch::autograd::Function<SsdFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A,
                               const at::Tensor& B, const at::Tensor& C, const at::Tensor& initial_state,
                               int64_t chunk_size) {
    ctx->save_for_backward({x, dt, A, B, C, initial_state});
    ctx->saved_data["chunk_size"] = chunk_size;
    const SsdOutputs out = forward_values({x, dt, A, B, C, given(initial_state)}, chunk_size);
    return {out.y, out.final_state};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const SsdInputs in{saved[0], saved[1], saved[2], saved[3], saved[4], given(saved[5])};
    const ssd::SsdGradients g = ssd::ssd_backward(in, ctx->saved_data["chunk_size"].toInt(), grads[0], grads[1]);
    return {g.x.to(in.x.scalar_type()),
            g.dt.to(in.dt.scalar_type()),
            g.A.to(in.A.scalar_type()),
            g.B.to(in.B.scalar_type()),
            g.C.to(in.C.scalar_type()),
            initial_gradient(in, g),
            at::Tensor()};
  }
};

// xBC's (or its gradient's) x, B and C along its last dim: R P, N, N.
std::vector<at::Tensor> split_xBC(const at::Tensor& xBC, int64_t state_size) {
  return xBC.split_with_sizes({xBC.size(3) - 2 * state_size, state_size, state_size}, 3);
}

// SsdFunction over xBC whole: x, B and C's gradients written into one of xBC's shape, x's
// returned as a third output (the D skip's) added into it (ssd_backward's GradientDestinations).
class PackedSsdFunction : public torch::autograd::Function<PackedSsdFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& xBC, const at::Tensor& dt, const at::Tensor& A,
                               const at::Tensor& initial_state, int64_t state_size, int64_t chunk_size) {
    ctx->save_for_backward({xBC, dt, A, initial_state});
    ctx->saved_data["state_size"] = state_size;
    ctx->saved_data["chunk_size"] = chunk_size;
    const SsdInputs in = ssd_inputs_of({xBC, dt, A, given(initial_state), state_size});
    check_inputs(in, chunk_size);
    const SsdOutputs out = forward_values(in, chunk_size);
    return {out.y, out.final_state, in.x};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& xBC = saved[0];
    const int64_t state_size = ctx->saved_data["state_size"].toInt();
    const SsdInputs in = ssd_inputs_of({xBC, saved[1], saved[2], given(saved[3]), state_size});
    at::Tensor d_xBC = at::empty(xBC.sizes(), xBC.options());
    const std::vector<at::Tensor> parts = split_xBC(d_xBC, state_size);
    const ssd::GradientDestinations into{parts[0], parts[1], parts[2], grads[2]};
    const ssd::SsdGradients g = ssd::ssd_backward(in, ctx->saved_data["chunk_size"].toInt(), grads[0], grads[1], &into);
    return {
        d_xBC,       g.dt.to(in.dt.scalar_type()), g.A.to(in.A.scalar_type()), initial_gradient(in, g), at::Tensor(),
        at::Tensor()};
  }
};

}  // namespace

SsdOutputs ssd_chunked(const SsdInputs& in, int64_t chunk_size) {
  check_inputs(in, chunk_size);
  const at::Tensor initial = in.initial_state.defined() ? in.initial_state : at::empty({0}, in.dt.options());
  const variable_list out = SsdFunction::apply(in.x, in.dt, in.A, in.B, in.C, initial, chunk_size);
  return {out[0], out[1]};
}

SsdInputs ssd_inputs_of(const PackedSsdInputs& in) {
  const std::vector<at::Tensor> parts = split_xBC(in.xBC, in.state_size);
  const int64_t b = in.xBC.size(0), l = in.xBC.size(1), heads = in.dt.size(2);
  return {parts[0].reshape({b, l, heads, -1}), in.dt, in.A, parts[1], parts[2], in.initial_state};
}

PackedSsdOutputs ssd_chunked_packed(const PackedSsdInputs& in, int64_t chunk_size) {
  if (in.xBC.dim() != 4 || in.dt.dim() != 3 || in.state_size <= 0 || in.xBC.size(3) <= 2 * in.state_size ||
      in.dt.size(2) % in.xBC.size(2) != 0 ||
      (in.xBC.size(3) - 2 * in.state_size) % (in.dt.size(2) / in.xBC.size(2)) != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "ssd_chunked_packed: expected xBC [b, l, G, R P + 2 N] with N = "
                "state_size and dt [b, l, R G]");
  const at::Tensor initial = in.initial_state.defined() ? in.initial_state : at::empty({0}, in.dt.options());
  const variable_list out = PackedSsdFunction::apply(in.xBC, in.dt, in.A, initial, in.state_size, chunk_size);
  return {out[0], out[1], out[2]};
}

// On by default (=0 turns it off): on an H100 it gained 0.5% of the 780m step with its store of dx
// and the gated norm's term through LibTorch's unvectorised add (now the summed rows kernel). The
// strided-x test that went past its bound with it on does not take this path (ssd_chunked): its
// bound, not the path, was at fault (docs/mamba2-performance.md).
bool packed_gradient_switched_on() { return switched_on_unless_zero("TRIAX_MAMBA2_SSD_PACKED_GRADIENT"); }

}  // namespace triax::mamba2
