// The fused AdamW step of adamw_kernel.hpp. Tensors go in batches of kMaxTensors per launch,
// passed by value (no host-to-device copy, so a CUDA graph could hold the launch); each block
// updates kElementsPerBlock consecutive elements of one tensor.
#include "adamw_kernel.hpp"
#include "kernel_utils.cuh"

#include <type_traits>

namespace triax::plugins::adamw_kernel {
namespace {

using kernels::from_float;
using kernels::to_float;

constexpr int kMaxTensors = 40;  // keeps a batch under the 4 KiB of a kernel's parameters
constexpr int kThreads = 256;
constexpr int kElementsPerThread = 8;
constexpr int64_t kElementsPerBlock = int64_t{kThreads} * kElementsPerThread;

struct Batch {
  Operands tensors[kMaxTensors];
  int64_t first_block[kMaxTensors + 1];  // tensor t owns blocks [first_block[t], first_block[t + 1])
  int count;
};

// No rounded copy: the master is the parameter.
struct NoCopy {};

template <typename Grad, typename Rounded>
__global__ void __launch_bounds__(kThreads)
    fused_adamw_kernel(const __grid_constant__ Batch batch, const float* grad_scale, Scalars s) {
  const int64_t block = blockIdx.x;
  int t = 0;
  while (t + 1 < batch.count && batch.first_block[t + 1] <= block) ++t;
  const Operands& op = batch.tensors[t];
  const int64_t start = (block - batch.first_block[t]) * kElementsPerBlock;
  const float scale = grad_scale != nullptr ? *grad_scale : 1.0f;
  const auto* grad = static_cast<const Grad*>(op.grad);
  const float step_size = static_cast<float>(s.learning_rate / static_cast<double>(s.bias_correction1));
  const double decay = s.learning_rate * s.weight_decay;
#pragma unroll
  for (int k = 0; k < kElementsPerThread; ++k) {
    const int64_t i = start + int64_t{k} * kThreads + threadIdx.x;
    if (i >= op.numel) break;
    float g = to_float(grad[i]);
    if (grad_scale != nullptr) g *= scale;  // rounded to fp32, as clipping an fp32 buffer in place was
    float p = op.master[i];
    if (s.weight_decay != 0) p = static_cast<float>(p - decay * p);
    const float m = static_cast<float>(s.beta1 * op.exp_avg[i] + (1 - s.beta1) * g);
    const float v = static_cast<float>(s.beta2 * op.exp_avg_sq[i] + (1 - s.beta2) * g * g);
    const float denom = static_cast<float>(sqrtf(v) / s.bias_correction2_sqrt + s.eps);
    p -= step_size * m / denom;
    op.master[i] = p;
    op.exp_avg[i] = m;
    op.exp_avg_sq[i] = v;
    if constexpr (!std::is_same_v<Rounded, NoCopy>) static_cast<Rounded*>(op.rounded)[i] = from_float<Rounded>(p);
  }
}

template <typename Grad, typename Rounded>
cudaError_t launch_all(const Operands* operands, int count, const float* grad_scale, const Scalars& s,
                       cudaStream_t stream) {
  for (int first = 0; first < count; first += kMaxTensors) {
    Batch batch{};
    batch.count = std::min(kMaxTensors, count - first);
    int64_t blocks = 0;
    for (int t = 0; t < batch.count; ++t) {
      batch.tensors[t] = operands[first + t];
      batch.first_block[t] = blocks;
      blocks += (batch.tensors[t].numel + kElementsPerBlock - 1) / kElementsPerBlock;
    }
    batch.first_block[batch.count] = blocks;
    if (blocks == 0) continue;
    fused_adamw_kernel<Grad, Rounded><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(batch, grad_scale, s);
    if (cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

template <typename Grad>
cudaError_t with_rounded(kernels::Dtype rounded_dtype, bool any_rounded, const Operands* operands, int count,
                         const float* grad_scale, const Scalars& s, cudaStream_t stream) {
  if (!any_rounded) return launch_all<Grad, NoCopy>(operands, count, grad_scale, s, stream);
  switch (rounded_dtype) {
    case kernels::Dtype::BFloat16:
      return launch_all<Grad, __nv_bfloat16>(operands, count, grad_scale, s, stream);
    case kernels::Dtype::Float16:
      return launch_all<Grad, __half>(operands, count, grad_scale, s, stream);
    case kernels::Dtype::Float32:
      return launch_all<Grad, float>(operands, count, grad_scale, s, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t fused_adamw(const Operands* operands, int count, kernels::Dtype grad_dtype, kernels::Dtype rounded_dtype,
                        const float* grad_scale, const Scalars& scalars, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const bool any_rounded = operands[0].rounded != nullptr;
  for (int t = 0; t < count; ++t)
    if ((operands[t].rounded != nullptr) != any_rounded) return cudaErrorInvalidValue;  // one kind per call
  return kernels::dispatch_dtype(grad_dtype, [&](auto tag) {
    using Grad = typename decltype(tag)::type;
    return with_rounded<Grad>(rounded_dtype, any_rounded, operands, count, grad_scale, scalars, stream);
  });
}

}  // namespace triax::plugins::adamw_kernel
