// What the autograd functions of fused_ops.cpp and fused_linear_cross_entropy.cpp share to call
// the CUDA kernels (kernels/kernels.hpp): the kernels' dtype, the stream, the launch check.
// Included only when TRIAX_WITH_CUDA is defined.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <string>

#include "kernels/kernels.hpp"
#include "triax/error.hpp"

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

// LibTorch's current stream on t's device: kernels queue behind the ops that produced t.
inline cudaStream_t stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

inline void check(cudaError_t status, const char* kernel) {
  if (status != cudaSuccess)
    throw Error(TRIAX_ERROR_RUNTIME,
                std::string(kernel) + ": CUDA kernel launch failed: " + cudaGetErrorString(status));
}

}  // namespace triax::cuda_launch
