// The LibTorch reference of the selective scan and the causal conv1d: plain ops that autograd
// differentiates, for CPU and any input the CUDA kernels do not take.
#include "reference_scan.hpp"

#include <ATen/ATen.h>

#include <sstream>
#include <string>
#include <vector>

#include "triax/error.hpp"

namespace triax::mamba {
namespace {

// Positions whose decay and input terms are formed at once: bounds the temporaries to
// [b, d, kBlock, n] while keeping the per-position loop short.
constexpr int64_t kBlock = 128;

std::string shape_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

void require_shape(const char* op, const char* name, const at::Tensor& t, at::IntArrayRef expected,
                   const char* meaning) {
  if (t.sizes() != expected) {
    std::ostringstream out;
    out << op << ": " << name << " must be " << meaning << " = " << expected << ", got " << shape_of(t);
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, out.str());
  }
}

void require_float(const char* op, const char* name, const at::Tensor& t, const at::Tensor& reference) {
  if (!at::isFloatingType(t.scalar_type()))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(op) + ": " + name + " must be a floating-point tensor");
  if (t.device() != reference.device())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(op) + ": " + name + " is on another device than the input");
}

// The arithmetic type: fp64 stays fp64 (exact gradient checks), everything else runs in fp32.
c10::ScalarType compute_type(const at::Tensor& t) { return at::promote_types(t.scalar_type(), at::kFloat); }

}  // namespace

void check_scan_args(const SelectiveScanArgs& args, const at::Tensor& initial_state) {
  const char* op = "selective_scan";
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"u", &args.u},
                                {"delta", &args.delta},
                                {"A", &args.A},
                                {"B", &args.B},
                                {"C", &args.C}})
    if (!t->defined()) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(op) + ": " + name + " is required");
  if (args.u.dim() != 3)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(op) + ": u must be [b, d, l], got " + shape_of(args.u));
  if (args.A.dim() != 2)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(op) + ": A must be [d, n], got " + shape_of(args.A));
  const int64_t b = args.u.size(0), d = args.u.size(1), l = args.u.size(2), n = args.A.size(1);
  require_float(op, "u", args.u, args.u);
  require_shape(op, "delta", args.delta, {b, d, l}, "[b, d, l]");
  require_shape(op, "A", args.A, {d, n}, "[d, n]");
  require_shape(op, "B", args.B, {b, n, l}, "[b, n, l]");
  require_shape(op, "C", args.C, {b, n, l}, "[b, n, l]");
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"delta", &args.delta},
                                {"A", &args.A},
                                {"B", &args.B},
                                {"C", &args.C}})
    require_float(op, name, *t, args.u);
  if (args.D.defined()) {
    require_shape(op, "D", args.D, {d}, "[d]");
    require_float(op, "D", args.D, args.u);
  }
  if (args.z.defined()) {
    require_shape(op, "z", args.z, {b, d, l}, "[b, d, l]");
    require_float(op, "z", args.z, args.u);
  }
  if (args.delta_bias.defined()) {
    require_shape(op, "delta_bias", args.delta_bias, {d}, "[d]");
    require_float(op, "delta_bias", args.delta_bias, args.u);
  }
  if (initial_state.defined()) {
    require_shape(op, "initial_state", initial_state, {b, d, n}, "[b, d, n]");
    require_float(op, "initial_state", initial_state, args.u);
  }
}

void check_conv_args(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const char* op = "causal_conv1d";
  if (!x.defined() || x.dim() != 3)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                std::string(op) + ": x must be [b, d, l], got " + (x.defined() ? shape_of(x) : "nothing"));
  if (!weight.defined() || weight.dim() != 2 || weight.size(0) != x.size(1) || weight.size(1) < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(op) +
                                                  ": weight must be [d, k] with d = " + std::to_string(x.size(1)) +
                                                  ", got " + (weight.defined() ? shape_of(weight) : "nothing"));
  require_float(op, "x", x, x);
  require_float(op, "weight", weight, x);
  if (bias.defined()) {
    require_shape(op, "bias", bias, {x.size(1)}, "[d]");
    require_float(op, "bias", bias, x);
  }
}

std::pair<at::Tensor, at::Tensor> selective_scan_reference(const SelectiveScanArgs& args,
                                                           const at::Tensor& initial_state) {
  const c10::ScalarType type = compute_type(args.u);
  const at::Tensor u = args.u.to(type), A = args.A.to(type);
  const int64_t b = u.size(0), d = u.size(1), l = u.size(2), n = A.size(1);
  at::Tensor dt = args.delta.to(type);
  if (args.delta_bias.defined()) dt = dt + args.delta_bias.to(type).unsqueeze(-1);
  if (args.delta_softplus) dt = at::softplus(dt);  // threshold 20: the identity beyond, as torch's
  // Per position t: B_t, C_t as [b, 1, l, n] so that they broadcast over the channels.
  const at::Tensor B = args.B.to(type).transpose(1, 2).unsqueeze(1);
  const at::Tensor C = args.C.to(type).transpose(1, 2).unsqueeze(1);
  const at::Tensor dt_u = dt * u;

  at::Tensor h = initial_state.defined() ? initial_state.to(type) : at::zeros({b, d, n}, u.options());
  std::vector<at::Tensor> y_blocks;
  for (int64_t start = 0; start < l; start += kBlock) {
    const int64_t len = std::min(kBlock, l - start);
    // decay[b, d, t, n] = exp(dt * A); input[b, d, t, n] = dt * u * B.
    const at::Tensor decay = at::exp(dt.narrow(2, start, len).unsqueeze(-1) * A.unsqueeze(1));
    const at::Tensor input = dt_u.narrow(2, start, len).unsqueeze(-1) * B.narrow(2, start, len);
    std::vector<at::Tensor> states;
    states.reserve(static_cast<size_t>(len));
    for (int64_t t = 0; t < len; ++t) {
      h = decay.select(2, t) * h + input.select(2, t);
      states.push_back(h);
    }
    y_blocks.push_back((at::stack(states, 2) * C.narrow(2, start, len)).sum(-1));
  }
  at::Tensor y = l > 0 ? at::cat(y_blocks, 2) : at::zeros_like(u);
  if (args.D.defined()) y = y + args.D.to(type).unsqueeze(-1) * u;
  if (args.z.defined()) y = y * at::silu(args.z.to(type));
  return {y.to(args.u.scalar_type()), h};
}

at::Tensor causal_conv1d_reference(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu) {
  const c10::ScalarType type = compute_type(x);
  const int64_t k = weight.size(1);
  const at::Tensor padded = at::constant_pad_nd(x.to(type), {k - 1, 0});
  const at::Tensor bias_t = bias.defined() ? bias.to(type) : at::Tensor();
  const int64_t stride[] = {1}, padding[] = {0}, dilation[] = {1};
  at::Tensor y = at::conv1d(padded, weight.to(type).unsqueeze(1), bias_t, stride, padding, dilation, x.size(1));
  if (silu) y = at::silu(y);
  return y.to(x.scalar_type());
}

}  // namespace triax::mamba
