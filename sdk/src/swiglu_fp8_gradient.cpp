// The stand-in of SwiGLU's gradient and its quantise (swiglu_fp8_gradient.hpp).
#include "swiglu_fp8_gradient.hpp"

#ifdef TRIAX_WITH_CUDA
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include "quantised_stand_in.hpp"
#include "triax/error.hpp"
#include "triax/kernels/cuda_launch.hpp"

namespace triax {
namespace {

struct SwigluOperands {
  kernels::Dtype dtype;
  const void* grad_y;
  const char* gate;
  const char* up;
  int64_t rows, cols;
};

SwigluOperands swiglu_operands_of(const at::Tensor& gate_up, const at::Tensor& grad_y) {
  const int64_t cols = gate_up.size(-1) / 2;
  const char* gate = static_cast<const char*>(gate_up.const_data_ptr());
  return {*cuda_launch::kernel_dtype(gate_up.scalar_type()),
          grad_y.const_data_ptr(),
          gate,
          gate + cols * gate_up.element_size(),
          gate_up.numel() / (2 * cols),
          cols};
}

fp8::Fp8Matrix quantise_swiglu_gradient(const at::Tensor& gate_up, const at::Tensor& grad_y,
                                        const fp8::Scaling& scaling, const TensorParallel& tp, fp8::Layout layout) {
  if (scaling.amax_dim >= 0 || layout != fp8::Layout::Both)
    throw Error(TRIAX_ERROR_RUNTIME,
                "SwiGLU's gradient in fp8: its product asked for rowwise scales or one layout (tensorwise, both "
                "layouts expected)");
  c10::cuda::CUDAGuard device(gate_up.device());
  const SwigluOperands o = swiglu_operands_of(gate_up, grad_y);
  const cudaStream_t stream = cuda_launch::stream_of(gate_up);
  // The first pass: the amax of the gradient as swiglu_backward would record it, nothing stored.
  const at::Tensor slots = at::zeros({kernels::kAmaxSlots}, gate_up.options().dtype(at::kFloat));
  cuda_launch::check(kernels::swiglu_backward(o.dtype, o.grad_y, o.cols, o.gate, o.up, nullptr, nullptr, nullptr,
                                              2 * o.cols, slots.mutable_data_ptr<float>(), o.rows, o.cols, stream),
                     "swiglu backward (amax of the fp8 gradient)");
  const fp8::ScaleAndMultiplier scales = fp8::tensor_scales_from_amax_slots(slots, scaling, tp);
  fp8::Fp8Matrix m;
  m.scale = scales.scale;
  m.data = at::empty({o.rows, 2 * o.cols}, gate_up.options().dtype(scaling.format));
  m.transposed = at::empty({2 * o.cols, o.rows}, gate_up.options().dtype(scaling.format));
  const at::Tensor multiplier = scales.multiplier.contiguous();
  cuda_launch::check(
      kernels::swiglu_backward_to_fp8(o.dtype, o.grad_y, o.gate, o.up, 2 * o.cols, multiplier.const_data_ptr<float>(),
                                      scaling.format == c10::ScalarType::Float8_e5m2, m.data.mutable_data_ptr(),
                                      m.transposed.mutable_data_ptr(), o.rows, o.cols, stream),
      "swiglu backward into fp8");
  return m;
}

}  // namespace

bool swiglu_gradient_in_fp8_applies(const at::Tensor& gate_up, const at::Tensor& grad_y) {
  if (!gate_up.is_contiguous() || !grad_y.is_contiguous() || !cuda_launch::kernel_dtype(gate_up.scalar_type()))
    return false;
  const SwigluOperands o = swiglu_operands_of(gate_up, grad_y);
  // Fresh outputs are aligned: stand-ins for them pass the check.
  const void* aligned = o.gate;
  return kernels::swiglu_backward_to_fp8_applies(o.rows, o.cols, 2 * o.cols, o.grad_y, o.gate, o.up, aligned, aligned);
}

at::Tensor swiglu_gradient_in_fp8(const at::Tensor& gate_up, const at::Tensor& grad_y) {
  return fp8::quantised_stand_in(
      gate_up.sizes(), gate_up.options(),
      [gate_up, grad_y](const fp8::Scaling& scaling, const TensorParallel& tp, fp8::Layout layout) {
        return quantise_swiglu_gradient(gate_up, grad_y, scaling, tp, layout);
      });
}

}  // namespace triax
#endif
