#include "adamw_cuda.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <map>
#include <utility>

#include "triax/fp8_weight_amax.hpp"
#include "triax/kernels/cuda_launch.hpp"

namespace triax::plugins {
namespace {

namespace launch = triax::cuda_launch;

bool on_device(const at::Tensor& t, const at::Device& device) {
  return t.is_cuda() && t.device() == device && t.is_contiguous();
}

// The rounded copies whose amax the kernel computes for the next step's fp8 casts: a linear's
// weight (2-D, or 3-D as the fused q/k/v projection's; vectors are never cast), while fp8 casts
// would take it.
bool records_amax(const at::Tensor& rounded) { return rounded.defined() && rounded.dim() >= 2; }

// Zeroed slots (kernels::kAmaxSlots a parameter, one row each) when some are wanted, else undefined.
at::Tensor weight_amax_slots(const AdamWGroupTensors& group) {
  if (!fp8_weight_amaxes_wanted() || std::none_of(group.rounded.begin(), group.rounded.end(), records_amax))
    return {};
  return at::zeros({static_cast<int64_t>(group.masters.size()), kernels::kAmaxSlots},
                   group.masters.front().options().dtype(at::kFloat));
}

}  // namespace

bool adamw_kernel_applies(const AdamWGroupTensors& group, const at::Tensor& grad_scale) {
  if (!fused_kernels_enabled() || group.masters.empty()) return false;
  const at::Device device = group.masters.front().device();
  if (grad_scale.defined() &&
      !(grad_scale.is_cuda() && grad_scale.device() == device && grad_scale.scalar_type() == at::kFloat &&
        grad_scale.numel() == 1))
    return false;
  for (size_t i = 0; i < group.masters.size(); ++i) {
    const at::Tensor& grad = group.grads[i];
    const at::Tensor& rounded = group.rounded[i];
    if (!on_device(group.masters[i], device) || !on_device(group.exp_avg[i], device) ||
        !on_device(group.exp_avg_sq[i], device) || !on_device(grad, device) || !launch::kernel_dtype(grad.scalar_type()) ||
        grad.numel() != group.masters[i].numel())
      return false;
    if (rounded.defined() && (!on_device(rounded, device) || !launch::kernel_dtype(rounded.scalar_type()) ||
                              rounded.numel() != group.masters[i].numel()))
      return false;
  }
  return true;
}

void adamw_kernel_step(const AdamWGroupTensors& group, const at::Tensor& grad_scale,
                       const adamw_kernel::Scalars& scalars) {
  if (group.masters.empty()) return;
  const c10::cuda::CUDAGuard guard(group.masters.front().device());
  // The kernel takes one gradient dtype and one kind of rounded copy per call.
  std::map<std::pair<int, int>, std::vector<adamw_kernel::Operands>> calls;  // (grad dtype, rounded dtype or -1)
  const at::Tensor amax_slots = weight_amax_slots(group);
  for (size_t i = 0; i < group.masters.size(); ++i) {
    const at::Tensor& rounded = group.rounded[i];
    adamw_kernel::Operands op;
    op.master = group.masters[i].data_ptr<float>();
    op.exp_avg = group.exp_avg[i].data_ptr<float>();
    op.exp_avg_sq = group.exp_avg_sq[i].data_ptr<float>();
    op.grad = group.grads[i].const_data_ptr();
    op.rounded = rounded.defined() ? rounded.data_ptr() : nullptr;
    op.numel = group.masters[i].numel();
    if (amax_slots.defined() && records_amax(rounded))
      op.amax_slots = amax_slots[static_cast<int64_t>(i)].data_ptr<float>();
    const int grad_kind = static_cast<int>(*launch::kernel_dtype(group.grads[i].scalar_type()));
    const int rounded_kind = rounded.defined() ? static_cast<int>(*launch::kernel_dtype(rounded.scalar_type())) : -1;
    calls[{grad_kind, rounded_kind}].push_back(op);
  }
  const float* scale = grad_scale.defined() ? grad_scale.const_data_ptr<float>() : nullptr;
  const cudaStream_t stream = launch::stream_of(group.masters.front());
  for (const auto& [kinds, operands] : calls) {
    const auto rounded_dtype = kinds.second < 0 ? kernels::Dtype::Float32 : static_cast<kernels::Dtype>(kinds.second);
    launch::check(adamw_kernel::fused_adamw(operands.data(), static_cast<int>(operands.size()),
                                            static_cast<kernels::Dtype>(kinds.first), rounded_dtype, scale, scalars,
                                            stream),
                  "fused_adamw");
  }
  // The kernel wrote the rounded copies in place: their version counters say so, as the copy_ of
  // the path without the kernel does (an amax recorded at an earlier step no longer matches).
  for (const at::Tensor& rounded : group.rounded)
    if (rounded.defined()) rounded.unsafeGetTensorImpl()->bump_version();
  if (amax_slots.defined())
    for (size_t i = 0; i < group.rounded.size(); ++i)
      if (records_amax(group.rounded[i]))
        record_fp8_weight_amax(group.rounded[i], amax_slots[static_cast<int64_t>(i)]);
}

}  // namespace triax::plugins
