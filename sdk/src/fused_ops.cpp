// The fused ops' dispatch: CUDA tensors of a kernel dtype go through an autograd function that
// calls the kernels of sdk/src/kernels/; everything else through the LibTorch composition.
#include "triax/layers/fused_ops.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <vector>

#include "triax/environment_switch.hpp"
#include "triax/error.hpp"
#include "triax/tensor_text.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include "recorded_amax.hpp"
#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {
namespace {

void require(bool condition, const std::string& message) {
  if (!condition) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, message);
}

// ---- the LibTorch compositions (CPU, fp64, and the reference of the kernels) ------------------

at::Tensor rms_norm_composition(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // fp32 for fp32/bf16/fp16 inputs; fp64 inputs stay fp64 (exact gradient checks).
  at::Tensor x32 = x.to(at::promote_types(x.scalar_type(), at::kFloat));
  at::Tensor normed = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return normed.to(x.scalar_type()) * weight;
}

at::Tensor swiglu_composition(const at::Tensor& gate, const at::Tensor& up) { return at::silu(gate) * up; }

// chunk, not narrow: its backward joins the halves' gradients in one tensor.
at::Tensor swiglu_halves_composition(const at::Tensor& gate_up) {
  const std::vector<at::Tensor> halves = gate_up.chunk(2, -1);
  return swiglu_composition(halves[0], halves[1]);
}

at::Tensor rotary_composition(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor rotated = at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

// ---- the CUDA autograd functions -------------------------------------------------------------

#ifdef TRIAX_WITH_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
namespace launch = cuda_launch;

using launch::kernels_apply;

using fp8::amax_slots_if;

// An AmaxRecording through an autograd function's arguments and saved data.
int64_t code_of(AmaxRecording recording) { return static_cast<int64_t>(recording); }
bool records_output(int64_t recording) {
  return recording == code_of(AmaxRecording::Output) || recording == code_of(AmaxRecording::OutputAndInputGradient);
}
bool records_input_gradient(int64_t recording) {
  return recording == code_of(AmaxRecording::InputGradient) ||
         recording == code_of(AmaxRecording::OutputAndInputGradient);
}
float* slots_of(const at::Tensor& slots) { return slots.defined() ? slots.mutable_data_ptr<float>() : nullptr; }
using fp8::record_amax_if;

struct RmsNormFunction : torch::autograd::Function<RmsNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps,
                            int64_t recording) {
    c10::cuda::CUDAGuard device(x.device());
    const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
    const int64_t hidden = wc.numel(), rows = xc.numel() / hidden;
    at::Tensor y = at::empty(xc.sizes(), xc.options());
    at::Tensor rstd = at::empty({rows}, xc.options().dtype(at::kFloat));
    const at::Tensor slots = amax_slots_if(records_output(recording), xc);
    launch::check(kernels::rms_norm_forward(*launch::kernel_dtype(xc.scalar_type()), xc.const_data_ptr(), nullptr,
                                            wc.const_data_ptr(), y.mutable_data_ptr(), nullptr,
                                            rstd.mutable_data_ptr<float>(), slots_of(slots), rows, hidden,
                                            static_cast<float>(eps), launch::stream_of(xc)),
                  "rms_norm forward");
    record_amax_if(y, slots);
    ctx->saved_data["recording"] = recording;
    ctx->save_for_backward({xc, wc, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_x, grad_weight] = rms_norm_backward(grads[0], saved[0], saved[1], saved[2], at::Tensor(),
                                                   records_input_gradient(ctx->saved_data["recording"].toInt()));
    return {grad_x, grad_weight, at::Tensor(), at::Tensor()};
  }

  // The input and weight gradients of the norm of x, plus `direct` (undefined: none), a gradient
  // that reaches x by another path, added inside the kernel; with `record_amax`, the input
  // gradient's amax is recorded.
  static std::pair<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                             const at::Tensor& weight, const at::Tensor& rstd,
                                                             const at::Tensor& direct, bool record_amax) {
    c10::cuda::CUDAGuard device(x.device());
    const at::Tensor grad_y = grad.contiguous();
    const at::Tensor direct_c = direct.defined() ? direct.contiguous() : direct;
    const int64_t hidden = weight.numel(), rows = x.numel() / hidden;
    at::Tensor grad_x = at::empty(x.sizes(), x.options());
    at::Tensor partials = at::empty({kernels::rms_norm_weight_partials(rows), hidden}, x.options().dtype(at::kFloat));
    at::Tensor grad_weight = at::empty(weight.sizes(), weight.options());
    const at::Tensor slots = amax_slots_if(record_amax, x);
    launch::check(kernels::rms_norm_backward(*launch::kernel_dtype(x.scalar_type()), grad_y.const_data_ptr(),
                                             x.const_data_ptr(), weight.const_data_ptr(), rstd.const_data_ptr<float>(),
                                             direct_c.defined() ? direct_c.const_data_ptr() : nullptr,
                                             grad_x.mutable_data_ptr(), partials.mutable_data_ptr<float>(),
                                             grad_weight.mutable_data_ptr(), slots_of(slots), rows, hidden,
                                             launch::stream_of(x)),
                  "rms_norm backward");
    record_amax_if(grad_x, slots);
    return {grad_x, grad_weight};
  }
};

// h = x + y and the norm of h in one kernel; in backward, h's own gradient (the residual stream's)
// joins the norm's input gradient in the norm's kernel, and both x and y take that sum.
struct AddRmsNormFunction : torch::autograd::Function<AddRmsNormFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& y,
                               const at::Tensor& weight, double eps, int64_t recording) {
    c10::cuda::CUDAGuard device(x.device());
    const at::Tensor xc = x.contiguous(), yc = y.contiguous(), wc = weight.contiguous();
    const int64_t hidden = wc.numel(), rows = xc.numel() / hidden;
    at::Tensor sum = at::empty(xc.sizes(), xc.options());
    at::Tensor normed = at::empty(xc.sizes(), xc.options());
    at::Tensor rstd = at::empty({rows}, xc.options().dtype(at::kFloat));
    const at::Tensor slots = amax_slots_if(records_output(recording), xc);
    launch::check(kernels::rms_norm_forward(*launch::kernel_dtype(xc.scalar_type()), xc.const_data_ptr(),
                                            yc.const_data_ptr(), wc.const_data_ptr(), normed.mutable_data_ptr(),
                                            sum.mutable_data_ptr(), rstd.mutable_data_ptr<float>(), slots_of(slots),
                                            rows, hidden, static_cast<float>(eps), launch::stream_of(xc)),
                  "add_rms_norm forward");
    record_amax_if(normed, slots);
    ctx->saved_data["recording"] = recording;
    ctx->save_for_backward({sum, wc, rstd});
    return {sum, normed};
  }

  // grad_sum is the gradient of both x and y: with the recording, that of the fp8 product which
  // wrote y (attention's output projection, the MLP's down projection).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    auto [grad_sum, grad_weight] =
        RmsNormFunction::rms_norm_backward(grads[1], saved[0], saved[1], saved[2], grads[0],
                                           records_input_gradient(ctx->saved_data["recording"].toInt()));
    return {grad_sum, grad_sum, grad_weight, at::Tensor(), at::Tensor()};
  }
};

struct SwigluFunction : torch::autograd::Function<SwigluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    c10::cuda::CUDAGuard device(gate.device());
    const at::Tensor g = gate.contiguous(), u = up.contiguous();
    at::Tensor y = at::empty(g.sizes(), g.options());
    // Both operands contiguous: one row of every element.
    launch::check(
        kernels::swiglu_forward(*launch::kernel_dtype(g.scalar_type()), g.const_data_ptr(), u.const_data_ptr(),
                                g.numel(), y.mutable_data_ptr(), g.numel(), nullptr, 1, g.numel(), launch::stream_of(g)),
        "swiglu forward");
    ctx->save_for_backward({g, u});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &gate = saved[0], &up = saved[1];
    c10::cuda::CUDAGuard device(gate.device());
    const at::Tensor grad_y = grads[0].contiguous();
    at::Tensor grad_gate = at::empty(gate.sizes(), gate.options());
    at::Tensor grad_up = at::empty(up.sizes(), up.options());
    launch::check(kernels::swiglu_backward(*launch::kernel_dtype(gate.scalar_type()), grad_y.const_data_ptr(),
                                           gate.numel(), gate.const_data_ptr(), up.const_data_ptr(),
                                           grad_gate.mutable_data_ptr(), grad_up.mutable_data_ptr(), nullptr,
                                           gate.numel(), nullptr, 1, gate.numel(), launch::stream_of(gate)),
                  "swiglu backward");
    return {grad_gate, grad_up};
  }
};

// The gradient of gate_up [..., 2 cols] (contiguous) for grad_y [..., cols]; with `output`, the
// forward's output is written again there (allocated here) from the same reads; with
// `record_amax`, the gradient's amax is recorded.
at::Tensor swiglu_halves_backward(const at::Tensor& x, const at::Tensor& grad_output, at::Tensor* output,
                                  bool record_amax) {
  c10::cuda::CUDAGuard device(x.device());
  const at::Tensor grad_y = grad_output.contiguous();
  const int64_t cols = x.size(-1) / 2, rows = x.numel() / (2 * cols);
  at::Tensor grad = at::empty(x.sizes(), x.options());
  if (output) *output = at::empty(grad_y.sizes(), x.options());
  const at::Tensor slots = amax_slots_if(record_amax, x);
  const char* base = static_cast<const char*>(x.const_data_ptr());
  char* grad_base = static_cast<char*>(grad.mutable_data_ptr());
  const int64_t up_offset = cols * x.element_size();
  launch::check(kernels::swiglu_backward(*launch::kernel_dtype(x.scalar_type()), grad_y.const_data_ptr(), cols, base,
                                         base + up_offset, grad_base, grad_base + up_offset,
                                         output ? output->mutable_data_ptr() : nullptr, 2 * cols, slots_of(slots),
                                         rows, cols, launch::stream_of(x)),
                "swiglu (fused halves) backward");
  record_amax_if(grad, slots);
  return grad;
}

// gate and up as the halves of each row of one tensor: read in place, and the gradient written
// into one tensor of the same layout, so the fused GEMM's output and input gradient need no copy.
struct SwigluHalvesFunction : torch::autograd::Function<SwigluHalvesFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate_up, int64_t recording) {
    c10::cuda::CUDAGuard device(gate_up.device());
    const at::Tensor x = gate_up.contiguous();
    const int64_t cols = x.size(-1) / 2, rows = x.numel() / (2 * cols);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = cols;
    at::Tensor y = at::empty(shape, x.options());
    const at::Tensor slots = amax_slots_if(records_output(recording), x);
    const char* base = static_cast<const char*>(x.const_data_ptr());
    launch::check(kernels::swiglu_forward(*launch::kernel_dtype(x.scalar_type()), base, base + cols * x.element_size(),
                                          2 * cols, y.mutable_data_ptr(), cols, slots_of(slots), rows, cols,
                                          launch::stream_of(x)),
                  "swiglu (fused halves) forward");
    record_amax_if(y, slots);
    ctx->saved_data["recording"] = recording;
    ctx->save_for_backward({x});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const bool record_amax = records_input_gradient(ctx->saved_data["recording"].toInt());
    return {swiglu_halves_backward(ctx->get_saved_variables()[0], grads[0], nullptr, record_amax), at::Tensor()};
  }
};

// The operand with a contiguous last dim (other dims keep their strides).
at::Tensor last_dim_contiguous(const at::Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); }

// An output like `like` (same layout when that keeps head_dim contiguous).
at::Tensor rotary_output(const at::Tensor& like) {
  at::Tensor out = at::empty_like(like);
  return out.stride(3) == 1 ? out : at::empty(like.sizes(), like.options());
}

at::Tensor launch_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool inverse) {
  const at::Tensor in = last_dim_contiguous(x);
  at::Tensor out = rotary_output(in);
  kernels::RotaryLayout layout{in.size(0), in.size(1), in.size(2), in.size(3), {}, {}};
  for (int d = 0; d < 3; ++d) {
    layout.in_stride[d] = in.stride(d);
    layout.out_stride[d] = out.stride(d);
  }
  launch::check(kernels::rotary(*launch::kernel_dtype(in.scalar_type()), in.const_data_ptr(), cos.const_data_ptr(),
                                sin.const_data_ptr(), out.mutable_data_ptr(), layout, inverse, launch::stream_of(in)),
                inverse ? "apply_rotary backward" : "apply_rotary forward");
  return out;
}

struct RotaryFunction : torch::autograd::Function<RotaryFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    c10::cuda::CUDAGuard device(x.device());
    const at::Tensor c = cos.contiguous(), s = sin.contiguous();
    ctx->save_for_backward({c, s});
    return launch_rotary(x, c, s, /*inverse=*/false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    c10::cuda::CUDAGuard device(grads[0].device());
    return {launch_rotary(grads[0], saved[0], saved[1], /*inverse=*/true), at::Tensor(), at::Tensor()};
  }
};
#endif  // TRIAX_WITH_CUDA

}  // namespace

bool fused_kernels_enabled() {
#ifdef TRIAX_WITH_CUDA
  static const bool enabled = switched_on_unless_zero("TRIAX_FUSED_KERNELS");
  return enabled;
#else
  return false;
#endif
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                    [[maybe_unused]] AmaxRecording recording) {  // used by the CUDA kernel only
  RECORD_FUNCTION("triax::rms_norm", std::vector<c10::IValue>());  // one fused kernel on CUDA
  require(x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0),
          "rms_norm: weight " + shape_text(weight.sizes()) + " does not match the last dim of x " +
              shape_text(x.sizes()));
#ifdef TRIAX_WITH_CUDA
  if (x.numel() > 0 && kernels_apply({&x, &weight}))
    return RmsNormFunction::apply(x, weight, eps, code_of(recording));
#endif
  return rms_norm_composition(x, weight, eps);
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& y, const at::Tensor& weight,
                                               double eps, [[maybe_unused]] AmaxRecording recording) {
  RECORD_FUNCTION("triax::add_rms_norm", std::vector<c10::IValue>());  // one fused kernel on CUDA
  require(x.sizes() == y.sizes(), "add_rms_norm: x " + shape_text(x.sizes()) + " and y " + shape_text(y.sizes()) +
                                      " must have one shape");
  require(x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0),
          "add_rms_norm: weight " + shape_text(weight.sizes()) + " does not match the last dim of x " +
              shape_text(x.sizes()));
#ifdef TRIAX_WITH_CUDA
  if (x.numel() > 0 && kernels_apply({&x, &y, &weight})) {
    const variable_list outputs = AddRmsNormFunction::apply(x, y, weight, eps, code_of(recording));
    return {outputs[0], outputs[1]};
  }
#endif
  at::Tensor sum = x + y;
  return {sum, rms_norm_composition(sum, weight, eps)};
}

std::pair<at::Tensor, at::Tensor> add_rms_norm_fp32_residual(const at::Tensor& residual, const at::Tensor& y,
                                                              const at::Tensor& weight, double eps) {
  RECORD_FUNCTION("triax::add_rms_norm_fp32_residual", std::vector<c10::IValue>());  // one kernel on CUDA
  require(residual.sizes() == y.sizes() && residual.scalar_type() == at::kFloat,
          "add_rms_norm_fp32_residual: residual " + shape_text(residual.sizes()) + " " +
              c10::toString(residual.scalar_type()) + " must be fp32 of y's shape " + shape_text(y.sizes()));
  require(y.dim() >= 1 && weight.dim() == 1 && y.size(-1) == weight.size(0),
          "add_rms_norm_fp32_residual: weight " + shape_text(weight.sizes()) + " does not match the last dim of y " +
              shape_text(y.sizes()));
#ifdef TRIAX_WITH_CUDA
  const bool differentiated = at::GradMode::is_enabled() &&
                              (residual.requires_grad() || y.requires_grad() || weight.requires_grad());
  if (y.numel() > 0 && !differentiated && kernels_apply({&y, &weight}) && residual.is_cuda() &&
      residual.device() == y.device()) {
    c10::cuda::CUDAGuard device(y.device());
    const at::Tensor rc = residual.contiguous(), yc = y.contiguous(), wc = weight.contiguous();
    const int64_t hidden = wc.numel(), rows = yc.numel() / hidden;
    at::Tensor sum = at::empty(rc.sizes(), rc.options());
    at::Tensor normed = at::empty(yc.sizes(), yc.options());
    at::Tensor rstd = at::empty({rows}, rc.options());
    launch::check(kernels::add_rms_norm_forward_fp32_sum(
                      *launch::kernel_dtype(yc.scalar_type()), yc.const_data_ptr(), rc.const_data_ptr<float>(),
                      wc.const_data_ptr(), normed.mutable_data_ptr(), sum.mutable_data_ptr<float>(),
                      rstd.mutable_data_ptr<float>(), rows, hidden, static_cast<float>(eps), launch::stream_of(yc)),
                  "add_rms_norm_fp32_residual");
    return {sum, normed};
  }
#endif
  const at::Tensor sum = residual + y;  // fp32: y is promoted
  return {sum, rms_norm_composition(sum.to(y.scalar_type()), weight, eps)};
}

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  RECORD_FUNCTION("triax::swiglu", std::vector<c10::IValue>());  // one fused kernel on CUDA
  require(gate.sizes() == up.sizes(),
          "swiglu: gate " + shape_text(gate.sizes()) + " and up " + shape_text(up.sizes()) +
              " must have the same shape");
#ifdef TRIAX_WITH_CUDA
  if (kernels_apply({&gate, &up})) return SwigluFunction::apply(gate, up);
#endif
  return swiglu_composition(gate, up);
}

at::Tensor swiglu_halves(const at::Tensor& gate_up, [[maybe_unused]] AmaxRecording recording) {
  RECORD_FUNCTION("triax::swiglu_halves", std::vector<c10::IValue>());  // one fused kernel on CUDA
  require(gate_up.dim() >= 1 && gate_up.size(-1) % 2 == 0,
          "swiglu_halves: gate_up " + shape_text(gate_up.sizes()) + " must have an even last dim (gate, then up)");
#ifdef TRIAX_WITH_CUDA
  if (gate_up.numel() > 0 && kernels_apply({&gate_up}))
    return SwigluHalvesFunction::apply(gate_up, code_of(recording));
#endif
  return swiglu_halves_composition(gate_up);
}

std::pair<at::Tensor, at::Tensor> swiglu_halves_backward_and_output(const at::Tensor& gate_up,
                                                                    const at::Tensor& grad_y) {
  std::vector<int64_t> out_shape = gate_up.sizes().vec();
  if (!out_shape.empty()) out_shape.back() /= 2;
  require(gate_up.dim() >= 1 && gate_up.size(-1) % 2 == 0 && grad_y.sizes() == at::IntArrayRef(out_shape),
          "swiglu_halves_backward_and_output: gate_up " + shape_text(gate_up.sizes()) +
              " must have an even last dim and grad_y " + shape_text(grad_y.sizes()) + " its shape with half of it");
#ifdef TRIAX_WITH_CUDA
  if (gate_up.numel() > 0 && kernels_apply({&gate_up, &grad_y})) {
    at::Tensor output;
    at::Tensor grad = swiglu_halves_backward(gate_up.contiguous(), grad_y, &output, /*record_amax=*/false);
    return {grad, output};
  }
#endif
  at::Tensor input = gate_up.detach().requires_grad_(true);
  at::Tensor output;
  {
    at::AutoGradMode enable(true);
    output = swiglu_halves(input);
  }
  at::Tensor grad = torch::autograd::grad({output}, {input}, {grad_y})[0];
  return {grad, output.detach()};
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  RECORD_FUNCTION("triax::apply_rotary", std::vector<c10::IValue>());  // one fused kernel on CUDA
  require(x.dim() == 4 && x.size(3) % 2 == 0,
          "apply_rotary: x must be [batch, heads, seq, head_dim] with an even head_dim, got " + shape_text(x.sizes()));
  for (const at::Tensor* table : {&cos, &sin})
    require(table->dim() == 2 && table->size(0) == x.size(2) && table->size(1) == x.size(3),
            std::string("apply_rotary: ") + (table == &cos ? "cos " : "sin ") + shape_text(table->sizes()) +
                " must be [seq, head_dim] = [" + std::to_string(x.size(2)) + ", " + std::to_string(x.size(3)) +
                "] to match x " + shape_text(x.sizes()));
#ifdef TRIAX_WITH_CUDA
  if (kernels_apply({&x, &cos, &sin})) {
    require(!cos.requires_grad() && !sin.requires_grad(),
            "apply_rotary: cos and sin are constant tables; the CUDA kernel does not differentiate them "
            "(detach them)");
    return RotaryFunction::apply(x, cos, sin);
  }
#endif
  return rotary_composition(x, cos, sin);
}

}  // namespace triax
