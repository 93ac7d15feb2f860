// What every generation of the gated norm's kernels (gated_norm.cu, gated_norm_v2.cu,
// gated_norm_backward_v3.cu) shares: the operands as typed pointers with their strides, the
// launch's dispatch over the activation type and y's type, and the per-element math (one
// expression each, so that every generation computes the same).
#pragma once

#include "gated_norm_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {

template <typename T, typename Y>
struct Operands {
  const Y* y;
  const T* x;
  const T* z;
  GroupedRows ys, xs, zs;  // strides only
  const float* D;
  const float* weight;
  int64_t groups, channels, head_dim;
  float eps;
};

template <typename T, typename Y>
Operands<T, Y> operands_of(const GatedNormInputs& in, const GatedNormShape& s) {
  return {static_cast<const Y*>(in.y.data), static_cast<const T*>(in.x.data), static_cast<const T*>(in.z.data),
          in.y, in.x, in.z, in.D, in.weight, s.groups, s.channels, s.head_dim, s.eps};
}

// Calls f(TypeTag<T>{}, TypeTag<Y>{}) for the inputs' activation type and y's type.
template <typename F>
cudaError_t dispatch_gated_norm_types(const GatedNormInputs& in, F&& f) {
  return triax::kernels::dispatch_dtype(in.dtype, [&](auto tag) {
    if (in.y_fp32) return f(tag, triax::kernels::TypeTag<float>{});
    return f(tag, tag);
  });
}

// The gate's sigmoid, as every gated norm kernel computes it (fast exp).
__device__ __forceinline__ float gate_sigmoid(float z) { return 1.f / (1.f + __expf(-z)); }

// The backward of one element: s = y + D x, the gate z with sig = gate_sigmoid(z), the output's
// gradient g, the norm weight w, the row's rstd r.
struct ElementBackward {
  float s, z, sig, g, w, r;
  // normed = s silu(z) r: the forward's output over w.
  __device__ __forceinline__ float normed() const { return s * z * sig * r; }
  // This element's share of the group's sum of d(normed) * normed.
  __device__ __forceinline__ float dot_term() const { return g * w * normed(); }
};

// The element's gradients, given mean_dot (the mean of dot_term over the group's channels):
// ds (y's gradient; x's is ds D), z's, and the element's term of the weight's gradient.
struct ElementGradients {
  float ds, dz, weight_term;
};

__device__ __forceinline__ ElementGradients element_gradients(const ElementBackward& e, float mean_dot) {
  const float normed = e.normed();
  const float dgated = e.r * (e.g * e.w - normed * mean_dot);
  return {dgated * e.z * e.sig, dgated * e.s * e.sig * (1.f + e.z * (1.f - e.sig)), e.g * normed};
}

}  // namespace triax::mamba2::kernels
