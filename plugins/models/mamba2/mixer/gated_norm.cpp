#include "gated_norm.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#include "gated_norm_cuda.hpp"

namespace triax::mamba2 {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

c10::ScalarType compute_type(const GatedNormArgs& a) { return at::promote_types(a.y.scalar_type(), at::kFloat); }

// The CPU formulas' shared terms, [rows, groups, channels] in the compute type: the skip
// s = y + D x, the gate's z and sigmoid(z), the gated value.
struct Terms {
  at::Tensor s, z, sigmoid, gated;
};

Terms terms_of(const GatedNormArgs& a) {
  const c10::ScalarType type = compute_type(a);
  const int64_t rows = a.y.size(0) * a.y.size(1);
  const at::Tensor s = a.y.to(type) + a.D.to(type).unsqueeze(-1) * a.x.to(type);
  Terms t;
  t.s = s.reshape({rows, a.groups, -1});
  t.z = a.z.to(type).reshape({rows, a.groups, -1});
  t.sigmoid = at::sigmoid(t.z);
  t.gated = t.s * t.z * t.sigmoid;
  return t;
}

GatedNormOutputs forward_cpu(const GatedNormArgs& a) {
  const Terms t = terms_of(a);
  const at::Tensor rstd = at::rsqrt(t.gated.pow(2).mean(-1, true) + a.eps);
  const at::Tensor normed = (t.gated * rstd).reshape(a.z.sizes());
  return {normed * a.weight.to(normed.scalar_type()), rstd.squeeze(-1)};
}

// d out / d gated through the norm, then through the gate to s and z; the weight's and D's sums.
GatedNormGradients backward_cpu(const GatedNormArgs& a, const at::Tensor& rstd, const at::Tensor& grad_out) {
  const Terms t = terms_of(a);
  const c10::ScalarType type = t.s.scalar_type();
  const at::Tensor r = rstd.to(type).unsqueeze(-1);
  const at::Tensor g = grad_out.to(type).reshape(t.s.sizes());
  const at::Tensor normed = t.gated * r;
  const at::Tensor dnormed = g * a.weight.to(type).view({a.groups, -1});
  const at::Tensor dgated = r * (dnormed - normed * (dnormed * normed).mean(-1, true));
  const at::Tensor ds = dgated * t.z * t.sigmoid;
  const at::Tensor dz = dgated * t.s * t.sigmoid * (1 + t.z * (1 - t.sigmoid));
  const at::Tensor ds_heads = ds.view(a.x.sizes());
  GatedNormGradients grads;
  grads.y = ds_heads.to(a.y.scalar_type());
  grads.x = (ds_heads * a.D.to(type).unsqueeze(-1)).to(a.x.scalar_type());
  grads.z = dz.view(a.z.sizes()).to(a.z.scalar_type());
  grads.D = (ds_heads * a.x.to(type)).sum(at::IntArrayRef{0, 1, 3}).to(a.D.scalar_type());
  grads.weight = (g * normed).sum(0).reshape(a.weight.sizes()).to(a.weight.scalar_type());
  return grads;
}

GatedNormArgs args_of(const variable_list& v, int64_t groups, double eps) { return {v[0], v[1], v[2], v[3], v[4], groups, eps}; }

// Keeps its inputs and the per-row rstd; the backward recomputes the gate and the norm.
class GatedNormFunction : public torch::autograd::Function<GatedNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const at::Tensor& x, const at::Tensor& z,
                            const at::Tensor& D, const at::Tensor& weight, int64_t groups, double eps,
                            c10::ScalarType dtype, const c10::intrusive_ptr<InProjGradient>& z_gradient) {
    const GatedNormArgs a{y, x, z, D, weight, groups, eps};
    const bool cuda = gated_norm_kernels_apply(a, dtype);
#ifdef TRIAX_MAMBA2_KERNELS
    const GatedNormOutputs out = cuda ? gated_norm_forward_cuda(a) : forward_cpu(a);
#else
    const GatedNormOutputs out = forward_cpu(a);
#endif
    ctx->save_for_backward({y, x, z, D, weight, out.rstd});
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["cuda"] = cuda;
    ctx->saved_data["z_gradient"] = as_saved(z_gradient);
    return out.out.to(dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const GatedNormArgs a = args_of(saved, ctx->saved_data["groups"].toInt(), ctx->saved_data["eps"].toDouble());
#ifdef TRIAX_MAMBA2_KERNELS
    const GatedNormGradients g =
        ctx->saved_data["cuda"].toBool()
            ? gated_norm_backward_cuda(a, saved[5], grads[0], from_saved(ctx->saved_data["z_gradient"]).get())
            : backward_cpu(a, saved[5], grads[0]);
#else
    const GatedNormGradients g = backward_cpu(a, saved[5], grads[0]);
#endif
    return {g.y, g.x, g.z, g.D, g.weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool gated_norm_kernels_apply(const GatedNormArgs& args, c10::ScalarType dtype) {
#ifdef TRIAX_MAMBA2_KERNELS
  return gated_norm_cuda_takes(args, dtype);
#else
  (void)args, (void)dtype;
  return false;
#endif
}

const char* gated_norm_kernels_used(const GatedNormArgs& args, c10::ScalarType dtype) {
#ifdef TRIAX_MAMBA2_KERNELS
  if (gated_norm_cuda_takes(args, dtype)) return gated_norm_cuda_kernel(args);
#endif
  (void)args, (void)dtype;
  return "composition";
}

at::Tensor gated_rms_norm_composed(const GatedNormArgs& a, c10::ScalarType dtype) {
  const c10::ScalarType type = compute_type(a);
  const at::Tensor y = (a.y.to(type) + a.D.to(type).unsqueeze(-1) * a.x.to(type)).reshape(a.z.sizes());
  const std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end());
  const at::Tensor gated = (y * at::silu(a.z.to(type))).reshape({shape[0], shape[1], a.groups, -1});
  const at::Tensor normed = gated * at::rsqrt(gated.pow(2).mean(-1, true) + a.eps);
  return (normed.reshape(shape) * a.weight.to(type)).to(dtype);
}

at::Tensor gated_rms_norm_function(const GatedNormArgs& a, c10::ScalarType dtype) {
  return GatedNormFunction::apply(a.y, a.x, a.z, a.D, a.weight, a.groups, a.eps, dtype,
                                  c10::intrusive_ptr<InProjGradient>());
}

at::Tensor gated_rms_norm(const GatedNormArgs& args, c10::ScalarType dtype) {
  return gated_rms_norm_landing_z(args, dtype, c10::intrusive_ptr<InProjGradient>());
}

at::Tensor gated_rms_norm_landing_z(const GatedNormArgs& a, c10::ScalarType dtype,
                                    const c10::intrusive_ptr<InProjGradient>& z_gradient) {
  if (gated_norm_kernels_apply(a, dtype))
    return GatedNormFunction::apply(a.y, a.x, a.z, a.D, a.weight, a.groups, a.eps, dtype, z_gradient);
  return gated_rms_norm_composed(a, dtype);
}

}  // namespace triax::mamba2
