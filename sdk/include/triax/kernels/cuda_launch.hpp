// What the autograd functions that call CUDA kernels share, the SDK's (fused_ops.cpp, rotary_qkv.cpp,
// fused_linear_cross_entropy.cpp) and plugins': whether the kernels apply, their dtype
// (triax/kernels/kernels.hpp), the fp32 operands and their gradients' dtypes, the stream, the
// launch check.
// Included only when TRIAX_WITH_CUDA is defined (it includes LibTorch's CUDA headers).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "triax/error.hpp"
#include "triax/kernels/kernels.hpp"
#include "triax/layers/fused_ops.hpp"

namespace triax::cuda_launch {

// The kernels' element type for `type`, or nothing (fp64, integers): the LibTorch composition
// runs instead.
inline std::optional<kernels::Dtype> kernel_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat:
      return kernels::Dtype::Float32;
    case c10::kBFloat16:
      return kernels::Dtype::BFloat16;
    case c10::kHalf:
      return kernels::Dtype::Float16;
    default:
      return std::nullopt;
  }
}

// An operand the kernels read in fp32 (a weight, a bias, a state), possibly absent: t in fp32 and
// contiguous, or undefined; then its data, or null, the kernels' "absent".
inline at::Tensor fp32_operand(const at::Tensor& t) { return t.defined() ? t.to(at::kFloat).contiguous() : t; }
inline const float* fp32_or_null(const at::Tensor& t) { return t.defined() ? t.const_data_ptr<float>() : nullptr; }

// t contiguous with its data 16-byte aligned, as kernels reading 16-byte vectors need: a view at
// an odd offset is copied.
inline at::Tensor contiguous_aligned(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return reinterpret_cast<std::uintptr_t>(c.const_data_ptr()) % 16 == 0 ? c : c.clone();
}

// An operand's own dtype, kept in an autograd context's saved_data (an int: it holds no
// ScalarType), -1 for an absent one; then its fp32 gradient cast back to it (undefined if absent).
inline int64_t saved_dtype(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.scalar_type()) : -1; }
inline at::Tensor in_saved_dtype(const at::Tensor& gradient, int64_t dtype) {
  return dtype < 0 ? at::Tensor() : gradient.to(static_cast<c10::ScalarType>(dtype));
}

// LibTorch's current stream on t's device: kernels queue behind the ops that produced t.
inline cudaStream_t stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

// Every operand on CUDA in one dtype the kernels handle, and the kernels not switched off.
inline bool kernels_apply(std::initializer_list<const at::Tensor*> operands) {
  if (!fused_kernels_enabled()) return false;
  const at::Tensor& first = **operands.begin();
  if (!first.is_cuda() || !kernel_dtype(first.scalar_type())) return false;
  for (const at::Tensor* t : operands)
    if (!t->is_cuda() || t->device() != first.device() || t->scalar_type() != first.scalar_type()) return false;
  return true;
}

inline void check(cudaError_t status, const char* kernel) {
  if (status != cudaSuccess)
    throw Error(TRIAX_ERROR_RUNTIME,
                std::string(kernel) + ": CUDA kernel launch failed: " + cudaGetErrorString(status));
}

}  // namespace triax::cuda_launch
