// Fused elementwise and normalisation ops of the Llama block, each an autograd function.
//
// On CUDA tensors of fp32, bf16 or fp16 (all operands of one dtype) a hand-written kernel runs
// (sdk/src/kernels/, built with -DTRIAX_CUDA=ON): one pass in fp32 arithmetic, rounded once to the
// output dtype. Everywhere else (CPU, fp64, mixed dtypes, a CPU-only build) the plain LibTorch
// composition written beside each op runs, so CPU results are those of the unfused code.
// TRIAX_FUSED_KERNELS=0 in the environment makes CUDA tensors take the composition too (for
// comparisons); docs/kernels.md lists the kernels and their tests. Each op opens a RecordFunction
// range "triax::NAME" (profiler traces, and the CPU op counts of a decoding step, which count a
// fused op once however many ops its composition runs).
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace triax {

// Which results of a fused op also have their absolute maximum recorded, computed by the kernel as
// it writes them, for an fp8 product that reads them (docs/fp8.md, "The amax from the producer"):
// none (the default: nothing is computed), the output, the gradient of the input that backward
// writes, or both. Only the CUDA kernels record; the compositions ignore it.
enum class AmaxRecording { None, Output, InputGradient, OutputAndInputGradient };
inline AmaxRecording amax_recording(bool output, bool input_gradient) {
  if (output) return input_gradient ? AmaxRecording::OutputAndInputGradient : AmaxRecording::Output;
  return input_gradient ? AmaxRecording::InputGradient : AmaxRecording::None;
}

// RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) in fp32 (fp64 for fp64 x), rounded to x's
// dtype, times weight (Hugging Face's LlamaRMSNorm). x: [..., hidden]; weight: [hidden].
// Composition: x32 * rsqrt(x32.pow(2).mean(-1) + eps), cast to x's dtype, * weight.
// CUDA backward: the weight gradient is summed over rows in fp32 (fixed order: reproducible).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                    AmaxRecording recording = AmaxRecording::None);
// A residual add, then RMSNorm: returns {h, rms_norm(h, weight, eps)} with h = x + y (x and y of
// one shape). On CUDA one kernel each way: the forward writes h and the norm, the backward adds
// the gradient reaching h directly (the residual stream's) inside the norm's backward, and x and y
// both take that sum. Composition: h = x + y, then rms_norm. `recording`: the norm's output, and
// the gradient of x and y (one tensor).
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& y, const at::Tensor& weight,
                                               double eps, AmaxRecording recording = AmaxRecording::None);
// add_rms_norm for a residual stream kept in fp32 (Mamba's residual_in_fp32), at inference:
// returns {h, rms_norm(h cast to y's dtype, weight, eps)} with h = residual + y in fp32 (fp64 for
// fp64 y); residual fp32 of y's shape, y and weight of the model's dtype. On CUDA (no gradient asked) one kernel,
// rms_norm.cu's forward with the add's sum in fp32; else the composition: h = residual + y, the
// cast, then rms_norm.
std::pair<at::Tensor, at::Tensor> add_rms_norm_fp32_residual(const at::Tensor& residual, const at::Tensor& y,
                                                              const at::Tensor& weight, double eps);

// SwiGLU: silu(gate) * up elementwise; gate and up of one shape. Composition: at::silu(gate) * up.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);
// SwiGLU of one fused gate/up projection's output: gate_up [..., 2n] holds gate in the first n of
// its last dim and up in the last n; returns [..., n]. Its gradient comes back in gate_up's layout
// (on CUDA without splitting or joining the halves). Composition: swiglu over gate_up.chunk(2, -1).
at::Tensor swiglu_halves(const at::Tensor& gate_up, AmaxRecording recording = AmaxRecording::None);
// swiglu_halves run again in backward: {the gradient of gate_up for grad_y, swiglu_halves(gate_up)}
// (what a backward that did not keep the output needs: linear_of_recomputed_activation). On CUDA
// one kernel reads gate_up once for both, and the output has swiglu_halves's bits. Composition:
// the output and its autograd gradient.
std::pair<at::Tensor, at::Tensor> swiglu_halves_backward_and_output(const at::Tensor& gate_up,
                                                                    const at::Tensor& grad_y);

// Rotary position embedding, "rotate half" layout: x * cos + rotate_half(x) * sin with
// rotate_half(x) = cat(-x2, x1) over the halves of head_dim. x: [batch, heads, seq, head_dim]
// (any strides); cos, sin: [seq, head_dim], constant tables (on CUDA they take no gradient).
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// Whether CUDA tensors use the hand-written kernels: true in a -DTRIAX_CUDA=ON build unless the
// environment sets TRIAX_FUSED_KERNELS=0 (read once).
bool fused_kernels_enabled();

}  // namespace triax
