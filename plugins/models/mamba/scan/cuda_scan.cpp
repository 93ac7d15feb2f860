// The autograd functions of the fused scan and conv1d: they shape the operands for the kernels
// of scan_kernels.hpp (contiguous, u's dtype for the activations, fp32 for the parameters) and
// hand each gradient back in its input's dtype.
#include "cuda_scan.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include <initializer_list>
#include <optional>

#include "scan_kernels.hpp"
#include "triax/kernels/cuda_launch.hpp"
#include "triax/layers/fused_ops.hpp"

namespace triax::mamba {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
namespace launch = triax::cuda_launch;
using launch::fp32_operand;
using launch::fp32_or_null;

bool on_device_of(const at::Tensor& first, std::initializer_list<const at::Tensor*> operands) {
  for (const at::Tensor* t : operands)
    if (t->defined() && (!t->is_cuda() || t->device() != first.device())) return false;
  return true;
}

// The activations in the kernels' dtype (u's), contiguous; parameters in fp32 (fp32_operand).
at::Tensor activation(const at::Tensor& t, c10::ScalarType type) { return t.defined() ? t.to(type).contiguous() : t; }
const void* any_ptr(const at::Tensor& t) { return t.defined() ? t.const_data_ptr() : nullptr; }
std::optional<at::Tensor> optional_of(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

// The operands of one call in the kernels' form; keeps the converted tensors alive.
struct Prepared {
  at::Tensor u, delta, A, B, C, D, z, delta_bias;
  kernels::ScanOperands operands;
};

Prepared prepare(const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A, const at::Tensor& B,
                 const at::Tensor& C, const at::Tensor& D, const at::Tensor& z, const at::Tensor& delta_bias,
                 bool softplus) {
  const c10::ScalarType type = u.scalar_type();
  Prepared p{activation(u, type), activation(delta, type),  fp32_operand(A),
             activation(B, type), activation(C, type),      fp32_operand(D),
             activation(z, type), fp32_operand(delta_bias), {}};
  p.operands = {*launch::kernel_dtype(type),
                p.u.size(0),
                p.u.size(1),
                p.u.size(2),
                p.A.size(1),
                p.u.const_data_ptr(),
                p.delta.const_data_ptr(),
                p.B.const_data_ptr(),
                p.C.const_data_ptr(),
                any_ptr(p.z),
                p.A.const_data_ptr<float>(),
                fp32_or_null(p.D),
                fp32_or_null(p.delta_bias),
                softplus};
  return p;
}

struct SelectiveScanFunction : torch::autograd::Function<SelectiveScanFunction> {
  // The optional operands travel as std::optional: autograd functions take no undefined tensor.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                            const at::Tensor& B, const at::Tensor& C, const std::optional<at::Tensor>& D_opt,
                            const std::optional<at::Tensor>& z_opt, const std::optional<at::Tensor>& delta_bias_opt,
                            bool softplus) {
    const at::Tensor D = D_opt.value_or(at::Tensor()), z = z_opt.value_or(at::Tensor());
    const at::Tensor delta_bias = delta_bias_opt.value_or(at::Tensor());
    c10::cuda::CUDAGuard device(u.device());
    Prepared p = prepare(u, delta, A, B, C, D, z, delta_bias, softplus);
    const int64_t b = p.u.size(0), d = p.u.size(1), l = p.u.size(2), n = p.A.size(1);
    at::Tensor y = at::empty_like(p.u);
    at::Tensor checkpoints = at::empty({b, d, kernels::checkpoint_count(l), n}, p.u.options().dtype(at::kFloat));
    launch::check(kernels::selective_scan_forward(p.operands, nullptr, y.mutable_data_ptr(), nullptr,
                                                  checkpoints.mutable_data_ptr<float>(), launch::stream_of(p.u)),
                  "selective_scan forward");
    ctx->save_for_backward({p.u, p.delta, p.A, p.B, p.C, p.D, p.z, p.delta_bias, checkpoints});
    ctx->saved_data["softplus"] = softplus;
    // The caller's dtypes, for the gradients.
    ctx->saved_data["types"] = std::vector<int64_t>{
        launch::saved_dtype(delta), launch::saved_dtype(A), launch::saved_dtype(B),         launch::saved_dtype(C),
        launch::saved_dtype(D),     launch::saved_dtype(z), launch::saved_dtype(delta_bias)};
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return variable_list(9);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &u = saved[0], &delta = saved[1], &A = saved[2], &B = saved[3], &C = saved[4], &D = saved[5],
                     &z = saved[6], &delta_bias = saved[7], &checkpoints = saved[8];
    c10::cuda::CUDAGuard device(u.device());
    const bool softplus = ctx->saved_data["softplus"].toBool();
    const std::vector<int64_t> types = ctx->saved_data["types"].toIntVector();
    Prepared p = prepare(u, delta, A, B, C, D, z, delta_bias, softplus);
    const at::Tensor grad_y = grads[0].to(u.scalar_type()).contiguous();
    const auto f32 = u.options().dtype(at::kFloat);
    at::Tensor du = at::empty_like(u), ddelta = at::empty_like(u);
    at::Tensor dz = z.defined() ? at::empty_like(u) : at::Tensor();
    at::Tensor dA = at::zeros(A.sizes(), f32), dB = at::zeros(B.sizes(), f32), dC = at::zeros(C.sizes(), f32);
    at::Tensor dD = D.defined() ? at::zeros(D.sizes(), f32) : at::Tensor();
    at::Tensor dbias = delta_bias.defined() ? at::zeros(delta_bias.sizes(), f32) : at::Tensor();
    const kernels::ScanGradients out{du.mutable_data_ptr(),
                                     ddelta.mutable_data_ptr(),
                                     dz.defined() ? dz.mutable_data_ptr() : nullptr,
                                     dA.mutable_data_ptr<float>(),
                                     dB.mutable_data_ptr<float>(),
                                     dC.mutable_data_ptr<float>(),
                                     dD.defined() ? dD.mutable_data_ptr<float>() : nullptr,
                                     dbias.defined() ? dbias.mutable_data_ptr<float>() : nullptr};
    launch::check(kernels::selective_scan_backward(p.operands, checkpoints.const_data_ptr<float>(),
                                                   grad_y.const_data_ptr(), out, launch::stream_of(u)),
                  "selective_scan backward");
    auto as = [&](const at::Tensor& g, size_t index) { return launch::in_saved_dtype(g, types[index]); };
    return {du, as(ddelta, 0), as(dA, 1), as(dB, 2), as(dC, 3), as(dD, 4), as(dz, 5), as(dbias, 6), at::Tensor()};
  }
};

struct CausalConv1dFunction : torch::autograd::Function<CausalConv1dFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias_opt, bool silu) {
    const at::Tensor bias = bias_opt.value_or(at::Tensor());
    c10::cuda::CUDAGuard device(x.device());
    const at::Tensor xc = x.contiguous(), w = fp32_operand(weight), b = fp32_operand(bias);
    at::Tensor y = at::empty_like(xc);
    launch::check(
        kernels::causal_conv1d_forward(*launch::kernel_dtype(xc.scalar_type()), xc.const_data_ptr(),
                                       w.const_data_ptr<float>(), fp32_or_null(b), y.mutable_data_ptr(), xc.size(0),
                                       xc.size(1), xc.size(2), w.size(1), silu, launch::stream_of(xc)),
        "causal_conv1d forward");
    ctx->save_for_backward({xc, w, b});
    ctx->saved_data["silu"] = silu;
    ctx->saved_data["weight_type"] = launch::saved_dtype(weight);
    ctx->saved_data["bias_type"] = launch::saved_dtype(bias);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &b = saved[2];
    c10::cuda::CUDAGuard device(x.device());
    const at::Tensor grad_y = grads[0].to(x.scalar_type()).contiguous();
    at::Tensor dx = at::empty_like(x);
    at::Tensor dw = at::empty(w.sizes(), w.options());
    at::Tensor db = b.defined() ? at::empty(b.sizes(), b.options()) : at::Tensor();
    launch::check(kernels::causal_conv1d_backward(
                      *launch::kernel_dtype(x.scalar_type()), x.const_data_ptr(), w.const_data_ptr<float>(),
                      fp32_or_null(b), grad_y.const_data_ptr(), dx.mutable_data_ptr(), dw.mutable_data_ptr<float>(),
                      db.defined() ? db.mutable_data_ptr<float>() : nullptr, x.size(0), x.size(1), x.size(2), w.size(1),
                      ctx->saved_data["silu"].toBool(), launch::stream_of(x)),
                  "causal_conv1d backward");
    return {dx, launch::in_saved_dtype(dw, ctx->saved_data["weight_type"].toInt()),
            launch::in_saved_dtype(db, ctx->saved_data["bias_type"].toInt()), at::Tensor()};
  }
};

}  // namespace

bool scan_kernels_apply(const SelectiveScanArgs& args) {
  const c10::ScalarType type = args.u.scalar_type();
  if (!fused_kernels_enabled() || !args.u.is_cuda() || (type != at::kFloat && type != at::kBFloat16)) return false;
  if (args.A.size(1) > kernels::kMaxState || args.u.size(2) == 0) return false;
  return on_device_of(args.u, {&args.delta, &args.A, &args.B, &args.C, &args.D, &args.z, &args.delta_bias});
}

bool conv_kernels_apply(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!fused_kernels_enabled() || !x.is_cuda() || !launch::kernel_dtype(x.scalar_type())) return false;
  if (weight.size(1) > kernels::kMaxConvWidth || x.size(2) == 0) return false;
  return on_device_of(x, {&weight, &bias});
}

at::Tensor selective_scan_cuda(const SelectiveScanArgs& a) {
  return SelectiveScanFunction::apply(a.u, a.delta, a.A, a.B, a.C, optional_of(a.D), optional_of(a.z),
                                      optional_of(a.delta_bias), a.delta_softplus);
}

std::pair<at::Tensor, at::Tensor> selective_scan_with_state_cuda(const SelectiveScanArgs& a,
                                                                 const at::Tensor& initial_state) {
  c10::cuda::CUDAGuard device(a.u.device());
  Prepared p = prepare(a.u, a.delta, a.A, a.B, a.C, a.D, a.z, a.delta_bias, a.delta_softplus);
  const at::Tensor start = fp32_operand(initial_state);
  at::Tensor y = at::empty_like(p.u);
  at::Tensor last = at::empty({p.u.size(0), p.u.size(1), p.A.size(1)}, p.u.options().dtype(at::kFloat));
  launch::check(kernels::selective_scan_forward(p.operands, fp32_or_null(start), y.mutable_data_ptr(),
                                                last.mutable_data_ptr<float>(), nullptr, launch::stream_of(p.u)),
                "selective_scan_with_state");
  return {y, last};
}

at::Tensor causal_conv1d_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu) {
  return CausalConv1dFunction::apply(x, weight, optional_of(bias), silu);
}

}  // namespace triax::mamba
