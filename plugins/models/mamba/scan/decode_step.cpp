// The decoding step's dispatch: the kernels of step_kernels.hpp where they apply
// (TRIAX_MAMBA_SCAN_KERNELS: -DTRIAX_CUDA=ON), else the composition over a sequence of one.
#include "decode_step.hpp"

#include <ATen/ATen.h>

#include "selective_scan.hpp"
#include "triax/error.hpp"
#include "triax/tensor_text.hpp"

#ifdef TRIAX_MAMBA_SCAN_KERNELS
#include <c10/cuda/CUDAGuard.h>

#include "step_kernels.hpp"
#include "triax/environment_switch.hpp"
#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax::mamba {
namespace {

void require_shape(const at::Tensor& t, at::IntArrayRef expected, const char* what) {
  if (!t.defined() || t.sizes() != expected)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string("mamba decoding step: ") + what + " is " +
                                                  (t.defined() ? shape_text(t.sizes()) : "undefined") + ", expected " +
                                                  shape_text(expected));
}

at::Tensor conv_composition(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                            const at::Tensor& bias) {
  const int64_t k = weight.size(1);
  const at::Tensor window = at::cat({conv_state, x.unsqueeze(2).to(conv_state.scalar_type())}, 2);  // [rows, d, k]
  const at::Tensor u = causal_conv1d(window, weight, bias, /*silu=*/true).select(2, k - 1).contiguous();
  conv_state.copy_(window.narrow(2, 1, k - 1));
  return u;
}

// delta before its bias: the operand, or the folded dt_proj product (as the mixer's own product).
at::Tensor delta_of(const SsmStepArgs& a) {
  return a.dt_proj_weight.defined() ? at::mm(a.dt, a.dt_proj_weight.t()) : a.delta;
}

at::Tensor ssm_composition(const SsmStepArgs& a, const at::Tensor& state) {
  const auto one_position = [](const at::Tensor& t) { return t.defined() ? t.unsqueeze(2) : t; };
  // The parameters in fp32, as the mixer's scan takes them (fp64 stays fp64: the tests' reference).
  const auto in_fp32 = [](const at::Tensor& t) {
    return t.defined() ? t.to(at::promote_types(t.scalar_type(), at::kFloat)) : t;
  };
  SelectiveScanArgs scan;
  scan.u = one_position(a.u);
  scan.delta = one_position(delta_of(a));
  scan.A = -at::exp(in_fp32(a.A_log));
  scan.B = one_position(a.B).contiguous();
  scan.C = one_position(a.C).contiguous();
  scan.D = in_fp32(a.D);
  scan.z = one_position(a.z);
  scan.delta_bias = in_fp32(a.delta_bias);
  scan.delta_softplus = true;
  auto [y, next] = selective_scan_with_state(scan, state);
  state.copy_(next);
  return y.squeeze(2);
}

#ifdef TRIAX_MAMBA_SCAN_KERNELS
namespace launch = triax::cuda_launch;

const void* optional_ptr(const at::Tensor& t) { return t.defined() ? t.const_data_ptr() : nullptr; }
// The SSM step's layout (ssm_state_step.cu): thread per channel from this many rows, where it
// measured faster (one H100: +4% decode at 32 rows, -10% at 1 row; docs/mamba-performance.md).
// TRIAX_MAMBA_SSM_STEP_PER_CHANNEL=1 or 0 forces one layout (read at every step).
constexpr int64_t kThreadPerChannelFromRows = 16;

bool thread_per_channel(int64_t rows) {
  return switch_forced("TRIAX_MAMBA_SSM_STEP_PER_CHANNEL").value_or(rows >= kThreadPerChannelFromRows);
}

// TRIAX_MAMBA_SSM_STEP_VECTOR=0: the thread-per-channel layout's scalar loads instead of its
// 16-byte vectors (same bits; ssm_state_step.cu), for timing one against the other. Read at every step.
bool vector_loads() { return switched_on_unless_zero("TRIAX_MAMBA_SSM_STEP_VECTOR"); }

bool unit_stride(const at::Tensor& t) { return !t.defined() || t.stride(-1) == 1; }
bool dense(const at::Tensor& t) { return !t.defined() || t.is_contiguous(); }

bool conv_kernel_applies(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                         const at::Tensor& bias) {
  const at::Tensor& b = bias.defined() ? bias : weight;
  return launch::kernels_apply({&x, &conv_state, &weight, &b}) && weight.size(1) <= kernels::kMaxConvWidth &&
         unit_stride(x) && dense(conv_state) && dense(weight) && dense(bias);
}

bool ssm_kernel_applies(const SsmStepArgs& a, const at::Tensor& state) {
  const at::Tensor &D = a.D.defined() ? a.D : a.u, &z = a.z.defined() ? a.z : a.u;
  const at::Tensor& bias = a.delta_bias.defined() ? a.delta_bias : a.u;
  const bool folded = a.dt_proj_weight.defined();
  const at::Tensor &delta = folded ? a.dt : a.delta, &dt_weight = folded ? a.dt_proj_weight : a.u;
  if (!launch::kernels_apply({&a.u, &delta, &dt_weight, &a.A_log, &a.B, &a.C, &D, &z, &bias})) return false;
  if (!state.is_cuda() || state.device() != a.u.device() || state.scalar_type() != at::kFloat) return false;
  const bool delta_readable = folded ? unit_stride(a.dt) && dense(a.dt_proj_weight) : dense(a.delta);
  return delta_readable && dense(a.u) && dense(a.A_log) && dense(a.D) && dense(a.delta_bias) && dense(state) &&
         unit_stride(a.B) && unit_stride(a.z) && a.B.strides() == a.C.strides();
}
#endif

}  // namespace

at::Tensor conv_state_step(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                           const at::Tensor& bias) {
  require_shape(x, {conv_state.size(0), weight.size(0)}, "x");
  require_shape(conv_state, {x.size(0), weight.size(0), weight.size(1) - 1}, "conv_state");
#ifdef TRIAX_MAMBA_SCAN_KERNELS
  if (conv_kernel_applies(x, conv_state, weight, bias)) {
    const c10::cuda::CUDAGuard device(x.device());
    at::Tensor u = at::empty(x.sizes(), x.options());
    const kernels::ConvStepOperands in{*launch::kernel_dtype(x.scalar_type()),
                                       x.size(0),
                                       x.size(1),
                                       weight.size(1),
                                       x.const_data_ptr(),
                                       x.stride(0),
                                       conv_state.mutable_data_ptr(),
                                       weight.const_data_ptr(),
                                       optional_ptr(bias)};
    launch::check(kernels::conv_state_step(in, u.mutable_data_ptr(), launch::stream_of(x)), "conv_state_step");
    return u;
  }
#endif
  return conv_composition(x, conv_state, weight, bias);
}

at::Tensor ssm_state_step(const SsmStepArgs& a, const at::Tensor& state) {
  const int64_t rows = a.u.size(0), d = a.u.size(1), n = a.A_log.size(1);
  if (a.dt_proj_weight.defined()) {
    if (a.delta.defined()) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "mamba decoding step: both delta and dt_proj");
    require_shape(a.dt_proj_weight, {d, a.dt_proj_weight.size(1)}, "dt_proj_weight");
    require_shape(a.dt, {rows, a.dt_proj_weight.size(1)}, "dt");
  } else {
    require_shape(a.delta, {rows, d}, "delta");
  }
  require_shape(a.A_log, {d, n}, "A_log");
  require_shape(a.B, {rows, n}, "B");
  require_shape(a.C, {rows, n}, "C");
  require_shape(state, {rows, d, n}, "state");
#ifdef TRIAX_MAMBA_SCAN_KERNELS
  if (ssm_kernel_applies(a, state)) {
    const c10::cuda::CUDAGuard device(a.u.device());
    at::Tensor y = at::empty(a.u.sizes(), a.u.options());
    const kernels::SsmStepOperands in{*launch::kernel_dtype(a.u.scalar_type()),
                                      a.u.size(0),
                                      a.u.size(1),
                                      a.A_log.size(1),
                                      a.u.const_data_ptr(),
                                      optional_ptr(a.delta),
                                      optional_ptr(a.z),
                                      a.z.defined() ? a.z.stride(0) : 0,
                                      a.B.const_data_ptr(),
                                      a.C.const_data_ptr(),
                                      a.B.stride(0),
                                      a.A_log.const_data_ptr(),
                                      optional_ptr(a.D),
                                      optional_ptr(a.delta_bias),
                                      optional_ptr(a.dt),
                                      a.dt.defined() ? a.dt.stride(0) : 0,
                                      a.dt.defined() ? a.dt.size(1) : 0,
                                      optional_ptr(a.dt_proj_weight),
                                      thread_per_channel(rows),
                                      vector_loads()};
    launch::check(kernels::ssm_state_step(in, state.mutable_data_ptr<float>(), y.mutable_data_ptr(),
                                          launch::stream_of(a.u)),
                  "ssm_state_step");
    return y;
  }
#endif
  return ssm_composition(a, state);
}

}  // namespace triax::mamba
