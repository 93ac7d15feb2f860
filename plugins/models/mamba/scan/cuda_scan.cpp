// The launches of the fused scan and conv1d (scan_kernels.hpp), which shape the operands for the
// kernels (contiguous, u's dtype for the activations, fp32 for the parameters), and the autograd
// functions over them, which hand each gradient back in its input's dtype.
#include "cuda_scan.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include <initializer_list>
#include <optional>
#include <vector>

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
  SelectiveScanArgs tensors;
  kernels::ScanOperands operands;
};

Prepared prepare(const SelectiveScanArgs& a) {
  const c10::ScalarType type = a.u.scalar_type();
  Prepared p{
      {activation(a.u, type), activation(a.delta, type), fp32_operand(a.A), activation(a.B, type),
       activation(a.C, type), fp32_operand(a.D), activation(a.z, type), fp32_operand(a.delta_bias), a.delta_softplus},
      {}};
  const SelectiveScanArgs& t = p.tensors;
  p.operands = {*launch::kernel_dtype(type),
                t.u.size(0),
                t.u.size(1),
                t.u.size(2),
                t.A.size(1),
                t.u.const_data_ptr(),
                t.delta.const_data_ptr(),
                t.B.const_data_ptr(),
                t.C.const_data_ptr(),
                any_ptr(t.z),
                t.A.const_data_ptr<float>(),
                fp32_or_null(t.D),
                fp32_or_null(t.delta_bias),
                t.delta_softplus};
  return p;
}

// The conv's operands in the kernels' form (y left undefined).
ConvKernelForward conv_operands(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return {x.contiguous(), fp32_operand(weight), fp32_operand(bias), at::Tensor()};
}

struct SelectiveScanFunction : torch::autograd::Function<SelectiveScanFunction> {
  // The optional operands travel as std::optional: autograd functions take no undefined tensor.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& u, const at::Tensor& delta, const at::Tensor& A,
                            const at::Tensor& B, const at::Tensor& C, const std::optional<at::Tensor>& D_opt,
                            const std::optional<at::Tensor>& z_opt, const std::optional<at::Tensor>& delta_bias_opt,
                            bool softplus) {
    const SelectiveScanArgs args{u,
                                 delta,
                                 A,
                                 B,
                                 C,
                                 D_opt.value_or(at::Tensor()),
                                 z_opt.value_or(at::Tensor()),
                                 delta_bias_opt.value_or(at::Tensor()),
                                 softplus};
    const ScanKernelForward forward = selective_scan_forward_kernel(args);
    const SelectiveScanArgs& k = forward.operands;
    ctx->save_for_backward({k.u, k.delta, k.A, k.B, k.C, k.D, k.z, k.delta_bias, forward.checkpoints});
    ctx->saved_data["softplus"] = softplus;
    // The caller's dtypes, for the gradients.
    ctx->saved_data["types"] = std::vector<int64_t>{launch::saved_dtype(delta),
                                                    launch::saved_dtype(A),
                                                    launch::saved_dtype(B),
                                                    launch::saved_dtype(C),
                                                    launch::saved_dtype(args.D),
                                                    launch::saved_dtype(args.z),
                                                    launch::saved_dtype(args.delta_bias)};
    return forward.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return variable_list(9);
    const variable_list saved = ctx->get_saved_variables();
    const SelectiveScanArgs kept{saved[0], saved[1], saved[2],
                                 saved[3], saved[4], saved[5],
                                 saved[6], saved[7], ctx->saved_data["softplus"].toBool()};
    const SelectiveScanGradients g = selective_scan_backward_kernel(kept, saved[8], grads[0]);
    const std::vector<int64_t> types = ctx->saved_data["types"].toIntVector();
    auto as = [&](const at::Tensor& gradient, size_t index) { return launch::in_saved_dtype(gradient, types[index]); };
    return {g.u,        as(g.delta, 0), as(g.A, 1),          as(g.B, 2),  as(g.C, 3),
            as(g.D, 4), as(g.z, 5),     as(g.delta_bias, 6), at::Tensor()};
  }
};

struct CausalConv1dFunction : torch::autograd::Function<CausalConv1dFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias_opt, bool silu) {
    const at::Tensor bias = bias_opt.value_or(at::Tensor());
    const ConvKernelForward forward = causal_conv1d_forward_kernel(x, weight, bias, silu);
    ctx->save_for_backward({forward.x, forward.weight, forward.bias});
    ctx->saved_data["silu"] = silu;
    ctx->saved_data["weight_type"] = launch::saved_dtype(weight);
    ctx->saved_data["bias_type"] = launch::saved_dtype(bias);
    return forward.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const CausalConv1dGradients g =
        causal_conv1d_backward_kernel(saved[0], saved[1], saved[2], ctx->saved_data["silu"].toBool(), grads[0]);
    return {g.x, launch::in_saved_dtype(g.weight, ctx->saved_data["weight_type"].toInt()),
            launch::in_saved_dtype(g.bias, ctx->saved_data["bias_type"].toInt()), at::Tensor()};
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

ScanKernelForward selective_scan_forward_kernel(const SelectiveScanArgs& args) {
  c10::cuda::CUDAGuard device(args.u.device());
  const Prepared p = prepare(args);
  const at::Tensor& u = p.tensors.u;
  at::Tensor y = at::empty_like(u);
  at::Tensor checkpoints = at::empty({u.size(0), u.size(1), kernels::checkpoint_count(u.size(2)), p.tensors.A.size(1)},
                                     u.options().dtype(at::kFloat));
  launch::check(kernels::selective_scan_forward(p.operands, nullptr, y.mutable_data_ptr(), nullptr,
                                                checkpoints.mutable_data_ptr<float>(), launch::stream_of(u)),
                "selective_scan forward");
  return {p.tensors, y, checkpoints};
}

SelectiveScanGradients selective_scan_backward_kernel(const SelectiveScanArgs& args, const at::Tensor& checkpoints,
                                                      const at::Tensor& grad_y) {
  c10::cuda::CUDAGuard device(args.u.device());
  const Prepared p = prepare(args);
  const SelectiveScanArgs& t = p.tensors;
  const at::Tensor grad_y_operand = grad_y.to(t.u.scalar_type()).contiguous();
  const auto f32 = t.u.options().dtype(at::kFloat);
  auto zeros_like_or_none = [&](const at::Tensor& operand) {
    return operand.defined() ? at::zeros(operand.sizes(), f32) : at::Tensor();
  };
  SelectiveScanGradients g{at::empty_like(t.u),
                           at::empty_like(t.u),
                           at::zeros(t.A.sizes(), f32),
                           at::zeros(t.B.sizes(), f32),
                           at::zeros(t.C.sizes(), f32),
                           zeros_like_or_none(t.D),
                           t.z.defined() ? at::empty_like(t.u) : at::Tensor(),
                           zeros_like_or_none(t.delta_bias)};
  auto float_or_null = [](at::Tensor& gradient) {
    return gradient.defined() ? gradient.mutable_data_ptr<float>() : nullptr;
  };
  const kernels::ScanGradients out{g.u.mutable_data_ptr(),
                                   g.delta.mutable_data_ptr(),
                                   g.z.defined() ? g.z.mutable_data_ptr() : nullptr,
                                   g.A.mutable_data_ptr<float>(),
                                   g.B.mutable_data_ptr<float>(),
                                   g.C.mutable_data_ptr<float>(),
                                   float_or_null(g.D),
                                   float_or_null(g.delta_bias)};
  launch::check(kernels::selective_scan_backward(p.operands, checkpoints.const_data_ptr<float>(),
                                                 grad_y_operand.const_data_ptr(), out, launch::stream_of(t.u)),
                "selective_scan backward");
  return g;
}

ConvKernelForward causal_conv1d_forward_kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                               bool silu) {
  c10::cuda::CUDAGuard device(x.device());
  ConvKernelForward f = conv_operands(x, weight, bias);
  f.y = at::empty_like(f.x);
  launch::check(kernels::causal_conv1d_forward(*launch::kernel_dtype(f.x.scalar_type()), f.x.const_data_ptr(),
                                               f.weight.const_data_ptr<float>(), fp32_or_null(f.bias),
                                               f.y.mutable_data_ptr(), f.x.size(0), f.x.size(1), f.x.size(2),
                                               f.weight.size(1), silu, launch::stream_of(f.x)),
                "causal_conv1d forward");
  return f;
}

CausalConv1dGradients causal_conv1d_backward_kernel(const at::Tensor& x, const at::Tensor& weight,
                                                    const at::Tensor& bias, bool silu, const at::Tensor& grad_y) {
  c10::cuda::CUDAGuard device(x.device());
  const ConvKernelForward k = conv_operands(x, weight, bias);
  const at::Tensor grad_y_operand = grad_y.to(k.x.scalar_type()).contiguous();
  CausalConv1dGradients g{at::empty_like(k.x), at::empty(k.weight.sizes(), k.weight.options()),
                          k.bias.defined() ? at::empty(k.bias.sizes(), k.bias.options()) : at::Tensor()};
  launch::check(kernels::causal_conv1d_backward(
                    *launch::kernel_dtype(k.x.scalar_type()), k.x.const_data_ptr(), k.weight.const_data_ptr<float>(),
                    fp32_or_null(k.bias), grad_y_operand.const_data_ptr(), g.x.mutable_data_ptr(),
                    g.weight.mutable_data_ptr<float>(), g.bias.defined() ? g.bias.mutable_data_ptr<float>() : nullptr,
                    k.x.size(0), k.x.size(1), k.x.size(2), k.weight.size(1), silu, launch::stream_of(k.x)),
                "causal_conv1d backward");
  return g;
}

at::Tensor selective_scan_cuda(const SelectiveScanArgs& a) {
  return SelectiveScanFunction::apply(a.u, a.delta, a.A, a.B, a.C, optional_of(a.D), optional_of(a.z),
                                      optional_of(a.delta_bias), a.delta_softplus);
}

std::pair<at::Tensor, at::Tensor> selective_scan_with_state_cuda(const SelectiveScanArgs& a,
                                                                 const at::Tensor& initial_state) {
  c10::cuda::CUDAGuard device(a.u.device());
  const Prepared p = prepare(a);
  const at::Tensor& u = p.tensors.u;
  const at::Tensor start = fp32_operand(initial_state);
  at::Tensor y = at::empty_like(u);
  at::Tensor last = at::empty({u.size(0), u.size(1), p.tensors.A.size(1)}, u.options().dtype(at::kFloat));
  launch::check(kernels::selective_scan_forward(p.operands, fp32_or_null(start), y.mutable_data_ptr(),
                                                last.mutable_data_ptr<float>(), nullptr, launch::stream_of(u)),
                "selective_scan_with_state");
  return {y, last};
}

at::Tensor causal_conv1d_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool silu) {
  return CausalConv1dFunction::apply(x, weight, optional_of(bias), silu);
}

}  // namespace triax::mamba
