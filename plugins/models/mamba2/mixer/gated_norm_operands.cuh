// What both generations of the gated norm's kernels (gated_norm.cu, gated_norm_v2.cu) read: the
// operands as typed pointers with their strides, and the launch's dispatch over the activation
// type and y's type.
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

}  // namespace triax::mamba2::kernels
