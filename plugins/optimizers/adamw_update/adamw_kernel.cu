// The fused AdamW step of adamw_kernel.hpp. Tensors go in batches of kMaxTensors per launch,
// passed by value (no host-to-device copy, so a CUDA graph could hold the launch); each block
// updates kElementsPerBlock consecutive elements of one tensor, in 16-byte vectors where every
// pointer of the tensor allows them. With a tensor's amax slots, its blocks also fold the largest
// |rounded value| into them (the next step's fp8 weight cast takes its scale from there).
#include "adamw_kernel.hpp"
#include "triax/kernels/kernel_utils.cuh"

#include <cstdint>
#include <type_traits>

namespace triax::plugins::adamw_kernel {
namespace {

using kernels::from_float;
using kernels::to_float;

constexpr int kMaxTensors = 40;  // keeps a batch under the 4 KiB of a kernel's parameters
constexpr int kThreads = 256;
// Each thread moves kPacks vectors of kWidth consecutive elements (16-byte fp32 accesses), all
// loads issued before the first store: the step is bound by memory, and scalar accesses left it
// at about two thirds of the bandwidth.
constexpr int kWidth = 4;
constexpr int kPacks = 4;
constexpr int64_t kElementsPerBlock = int64_t{kThreads} * kWidth * kPacks;

struct Batch {
  Operands tensors[kMaxTensors];
  int64_t first_block[kMaxTensors + 1];  // tensor t owns blocks [first_block[t], first_block[t + 1])
  int count;
};

// No rounded copy: the master is the parameter.
struct NoCopy {};

// One element's update (adamw_kernel.hpp), the same in the vector and the scalar walk. All in
// fp32, with the step's constants folded once per thread: LibTorch's kernel blends in fp64, which
// these GPUs issue at half of fp32's rate, for no difference beyond 1e-6 (AdamWKernelCuda).
struct Update {
  float scale, step_size, keep, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps;

  __device__ __forceinline__ Update(float grad_scale, const Scalars& s)
      : scale(grad_scale),
        step_size(static_cast<float>(s.learning_rate / static_cast<double>(s.bias_correction1))),
        keep(static_cast<float>(1.0 - s.learning_rate * s.weight_decay)),
        beta1(static_cast<float>(s.beta1)),
        one_minus_beta1(static_cast<float>(1.0 - s.beta1)),
        beta2(static_cast<float>(s.beta2)),
        one_minus_beta2(static_cast<float>(1.0 - s.beta2)),
        bias_correction2_sqrt(s.bias_correction2_sqrt),
        eps(static_cast<float>(s.eps)) {}

  __device__ __forceinline__ void operator()(float g, float& p, float& m, float& v) const {
    g *= scale;  // rounded to fp32, as clipping an fp32 buffer in place was (scale 1 changes nothing)
    p *= keep;   // decoupled weight decay: p - lr·wd·p (keep is 1 without decay)
    m = beta1 * m + one_minus_beta1 * g;
    v = beta2 * v + one_minus_beta2 * g * g;
    p -= step_size * m / (sqrtf(v) / bias_correction2_sqrt + eps);
  }
};

template <typename T>
__device__ __forceinline__ bool aligned_for_packs(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (sizeof(T) * kWidth) == 0;
}

// One thread's kPacks vectors of the block's elements from `start` (every pointer of the tensor
// aligned for them); returns the largest |rounded value| it stored (0 without a rounded copy).
template <typename Grad, typename Rounded, typename UpdateElement>
__device__ __forceinline__ float update_packs(const Operands& op, const Grad* grad, Rounded* rounded, int64_t start,
                                             const Update& update, UpdateElement update_element) {
  constexpr bool kRounded = !std::is_same_v<Rounded, NoCopy>;
  using FloatPack = kernels::Pack<float, kWidth>;
  FloatPack p[kPacks], m[kPacks], v[kPacks];
  kernels::Pack<Grad, kWidth> g[kPacks];
  auto first_of = [&](int k) { return start + (int64_t{k} * kThreads + threadIdx.x) * kWidth; };
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int64_t i = first_of(k);
    if (i + kWidth > op.numel) continue;
    p[k] = kernels::load_pack<float, kWidth>(op.master + i);
    m[k] = kernels::load_pack<float, kWidth>(op.exp_avg + i);
    v[k] = kernels::load_pack<float, kWidth>(op.exp_avg_sq + i);
    g[k] = kernels::load_pack<Grad, kWidth>(grad + i);
  }
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int64_t i = first_of(k);
    if (i >= op.numel) continue;
    if (i + kWidth > op.numel) {  // the tensor's last elements, fewer than a vector
      for (int64_t j = i; j < op.numel; ++j) amax = kernels::abs_max(amax, update_element(j));
      continue;
    }
#pragma unroll
    for (int e = 0; e < kWidth; ++e) update(to_float(g[k].v[e]), p[k].v[e], m[k].v[e], v[k].v[e]);
    kernels::store_pack<float, kWidth>(op.master + i, p[k]);
    kernels::store_pack<float, kWidth>(op.exp_avg + i, m[k]);
    kernels::store_pack<float, kWidth>(op.exp_avg_sq + i, v[k]);
    if constexpr (kRounded) {
      kernels::Pack<Rounded, kWidth> r;
#pragma unroll
      for (int e = 0; e < kWidth; ++e) {
        r.v[e] = from_float<Rounded>(p[k].v[e]);
        amax = kernels::abs_max(amax, to_float(r.v[e]));
      }
      kernels::store_pack<Rounded, kWidth>(rounded + i, r);
    }
  }
  return amax;
}

template <typename Grad, typename Rounded>
__global__ void __launch_bounds__(kThreads)
    fused_adamw_kernel(const __grid_constant__ Batch batch, const float* grad_scale, Scalars s) {
  const int64_t block = blockIdx.x;
  int t = 0;
  while (t + 1 < batch.count && batch.first_block[t + 1] <= block) ++t;
  const Operands& op = batch.tensors[t];
  const int64_t start = (block - batch.first_block[t]) * kElementsPerBlock;
  const Update update(grad_scale != nullptr ? *grad_scale : 1.0f, s);
  const auto* grad = static_cast<const Grad*>(op.grad);
  auto* rounded = static_cast<Rounded*>(op.rounded);
  constexpr bool kRounded = !std::is_same_v<Rounded, NoCopy>;

  bool packed = aligned_for_packs<float>(op.master) && aligned_for_packs<float>(op.exp_avg) &&
                aligned_for_packs<float>(op.exp_avg_sq) && aligned_for_packs<Grad>(grad);
  if constexpr (kRounded) packed = packed && aligned_for_packs<Rounded>(rounded);
  // Updates element i; returns |its rounded value| (0 without a rounded copy).
  auto update_element = [&](int64_t i) {
    float p = op.master[i], m = op.exp_avg[i], v = op.exp_avg_sq[i];
    update(to_float(grad[i]), p, m, v);
    op.master[i] = p;
    op.exp_avg[i] = m;
    op.exp_avg_sq[i] = v;
    if constexpr (kRounded) {
      const Rounded r = from_float<Rounded>(p);
      rounded[i] = r;
      return fabsf(to_float(r));
    }
    return 0.0f;
  };
  float amax = 0.0f;
  if (packed) {
    amax = update_packs(op, grad, rounded, start, update, update_element);
  } else {  // a view at an odd offset: one element at a time
    const int64_t end = op.numel < start + kElementsPerBlock ? op.numel : start + kElementsPerBlock;
    for (int64_t i = start + threadIdx.x; i < end; i += kThreads) amax = kernels::abs_max(amax, update_element(i));
  }
  // The tensor's slots are set or not for all of its blocks alike.
  if constexpr (kRounded) {
    if (op.amax_slots != nullptr) {
      __shared__ float scratch[33];
      kernels::fold_block_amax(amax, scratch, op.amax_slots);
    }
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
