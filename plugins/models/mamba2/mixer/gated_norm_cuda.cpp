#include "gated_norm_cuda.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>

#include "gated_norm_kernels.hpp"
#include "triax/environment_switch.hpp"
#include "triax/kernels/cuda_launch.hpp"

namespace triax::mamba2 {
namespace {

namespace launch = triax::cuda_launch;

// The backward keeps two fp32 sums per channel in shared memory: up to this many channels.
constexpr int64_t kMaxChannels = 24 * 1024;

// t as [rows, groups, channels] with unit channel stride: a view where the layout allows one.
at::Tensor grouped_rows(const at::Tensor& t, int64_t rows, int64_t groups) {
  at::Tensor r = t.reshape({rows, groups, -1});
  return r.stride(2) == 1 ? r : r.contiguous();
}

kernels::GroupedRows rows_of(const at::Tensor& t) { return {t.const_data_ptr(), t.stride(0), t.stride(1)}; }

// The operands in the kernels' form; keeps the reshaped and converted tensors alive.
struct Prepared {
  at::Tensor y, x, z, D, weight;
  kernels::GatedNormInputs inputs;
  kernels::GatedNormShape shape;
};

Prepared prepare(const GatedNormArgs& a) {
  const int64_t rows = a.y.size(0) * a.y.size(1);
  Prepared p{grouped_rows(a.y, rows, a.groups), grouped_rows(a.x, rows, a.groups), grouped_rows(a.z, rows, a.groups),
             a.D.to(at::kFloat).contiguous(), a.weight.to(at::kFloat).contiguous(), {}, {}};
  p.inputs = {*launch::kernel_dtype(a.x.scalar_type()), a.y.scalar_type() == at::kFloat, rows_of(p.y), rows_of(p.x),
              rows_of(p.z), p.D.const_data_ptr<float>(), p.weight.const_data_ptr<float>()};
  p.shape = {rows, a.groups, p.y.size(2), a.x.size(3), static_cast<float>(a.eps)};
  return p;
}

enum class Generation { v1, v2, v3 };

// TRIAX_MAMBA2_GATED_NORM_KERNEL, read at every call: v2's forward and the third backward
// (gated_norm_backward_v3.cu) where its operands are on whole 16-byte vectors (the backward 0.373 ->
// 0.280 ms at the 780m shape on an H100), else the second generation (gated_norm_v2.cu) where a
// row fits its registers, else the first; `v2` or `v1` asks for an older one.
Generation generation(const Prepared& p) {
  constexpr const char* kVariable = "TRIAX_MAMBA2_GATED_NORM_KERNEL";
  if (environment_is(kVariable, "v1") || !kernels::gated_norm_v2_fits(p.inputs, p.shape)) return Generation::v1;
  if (!environment_is(kVariable, "v2") && kernels::gated_norm_backward_v3_fits(p.inputs, p.shape))
    return Generation::v3;
  return Generation::v2;
}

// The rows of weight and D partial sums `chosen`'s backward writes.
int64_t partial_rows_of(Generation chosen, const Prepared& p) {
  switch (chosen) {
    case Generation::v3:
      return kernels::gated_norm_backward_v3_partial_rows(p.inputs, p.shape);
    case Generation::v2:
      return kernels::gated_norm_v2_partial_rows(p.inputs, p.shape);
    case Generation::v1:
      break;
  }
  return kernels::gated_norm_partial_rows(p.shape.rows);
}

auto backward_of(Generation chosen) {
  switch (chosen) {
    case Generation::v3:
      return kernels::gated_norm_backward_v3;
    case Generation::v2:
      return kernels::gated_norm_backward_v2;
    case Generation::v1:
      break;
  }
  return kernels::gated_norm_backward;
}

// z's gradient: its slot of `z_gradient` where the third backward writes it there (v3 stores dz
// with z's strides: the slot has them, and z's rows reshaped as the kernel reads them are z's
// own view), else a contiguous tensor. The slot must start on a 16-byte vector, as z does.
at::Tensor z_gradient_of(const GatedNormArgs& a, const Prepared& p, Generation chosen, InProjGradient* z_gradient) {
  if (z_gradient && chosen == Generation::v3 && p.z.is_alias_of(a.z) && p.z.data_ptr() == a.z.data_ptr()) {
    const at::Tensor slot = z_gradient->slot_for(a.z);
    if (slot.defined() && reinterpret_cast<std::uintptr_t>(slot.const_data_ptr()) % 16 == 0) return slot;
  }
  return at::empty(a.z.sizes(), a.z.options().memory_format(at::MemoryFormat::Contiguous));
}

}  // namespace

const char* gated_norm_cuda_kernel(const GatedNormArgs& a) {
  static constexpr const char* kNames[] = {"v1", "v2", "v3"};
  return kNames[static_cast<int>(generation(prepare(a)))];
}

bool gated_norm_cuda_takes(const GatedNormArgs& a, c10::ScalarType dtype) {
  static const bool switched_on = switched_on_unless_zero("TRIAX_MAMBA2_FUSED_NORM");
  if (!switched_on || !fused_kernels_enabled() || !a.x.is_cuda()) return false;
  for (const at::Tensor* t : {&a.y, &a.z, &a.D, &a.weight})
    if (!t->is_cuda() || t->device() != a.x.device()) return false;
  const c10::ScalarType type = a.x.scalar_type();
  return launch::kernel_dtype(type) && a.z.scalar_type() == type && dtype == type &&
         (a.y.scalar_type() == type || a.y.scalar_type() == at::kFloat) && a.weight.numel() <= kMaxChannels &&
         a.x.dim() == 4 && a.x.size(2) % a.groups == 0;
}

GatedNormOutputs gated_norm_forward_cuda(const GatedNormArgs& a) {
  c10::cuda::CUDAGuard device(a.x.device());
  const Prepared p = prepare(a);
  at::Tensor out = at::empty(a.z.sizes(), a.x.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor rstd = at::empty({p.shape.rows, a.groups}, a.x.options().dtype(at::kFloat));
  const auto forward = generation(p) == Generation::v1 ? kernels::gated_norm_forward : kernels::gated_norm_forward_v2;
  launch::check(forward(p.inputs, p.shape, out.data_ptr(), rstd.data_ptr<float>(), launch::stream_of(a.x)),
                "gated_norm_forward");
  return {out, rstd};
}

GatedNormGradients gated_norm_backward_cuda(const GatedNormArgs& a, const at::Tensor& rstd, const at::Tensor& grad_out,
                                            InProjGradient* z_gradient) {
  c10::cuda::CUDAGuard device(a.x.device());
  const Prepared p = prepare(a);
  const Generation chosen = generation(p);
  at::Tensor g = grad_out.to(a.x.scalar_type()).contiguous();
  if (chosen == Generation::v3) g = launch::contiguous_aligned(g);  // read by 16-byte vectors; the outputs are fresh
  const int64_t width = a.weight.numel();
  const int64_t partial_rows = partial_rows_of(chosen, p);
  const at::Tensor dy = at::empty(a.y.sizes(), a.y.options().memory_format(at::MemoryFormat::Contiguous));
  const at::Tensor dx = at::empty(a.x.sizes(), a.x.options().memory_format(at::MemoryFormat::Contiguous));
  const at::Tensor dz = z_gradient_of(a, p, chosen, z_gradient);
  const at::Tensor weight_partials = at::empty({partial_rows, width}, rstd.options());
  const at::Tensor skip_partials = at::empty({partial_rows, width}, rstd.options());
  // dz's [rows, groups, channels] strides: z's where it landed (only v3 reads them), else contiguous.
  const bool landed = !dz.is_contiguous();
  const kernels::GatedNormGradients grads{dy.data_ptr(),
                                          dx.data_ptr(),
                                          dz.data_ptr(),
                                          weight_partials.data_ptr<float>(),
                                          skip_partials.data_ptr<float>(),
                                          landed ? p.inputs.z.row_stride : width,
                                          landed ? p.inputs.z.group_stride : p.shape.channels};
  const auto backward = backward_of(chosen);
  launch::check(
      backward(p.inputs, p.shape, g.const_data_ptr(), rstd.const_data_ptr<float>(), grads, launch::stream_of(a.x)),
      "gated_norm_backward");
  const at::Tensor dD = skip_partials.sum(0).view({a.x.size(2), a.x.size(3)}).sum(1);
  return {dy, dx, dz, dD.to(a.D.scalar_type()),
          weight_partials.sum(0).view(a.weight.sizes()).to(a.weight.scalar_type())};
}

}  // namespace triax::mamba2
