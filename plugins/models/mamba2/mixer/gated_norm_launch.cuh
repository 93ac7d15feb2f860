// How the gated norm's register-resident generations (gated_norm_v2.cu, gated_norm_backward_v3.cu)
// plan a launch on the host: whether 16-byte vectors tile the operands, and a grid of as many
// blocks as the device holds at once (each walks rows, so its partial sums have a fixed order).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <type_traits>

#include "gated_norm_operands.cuh"

namespace triax::mamba2::kernels {

using triax::kernels::aligned16;
using triax::kernels::kVectorWidth;
using triax::kernels::vectorizable;

// Elements per 16-byte vector of the activations.
inline int vector_width(Dtype dtype) { return dtype == Dtype::Float32 ? 4 : 8; }

// An operand [rows, groups, channels] read by whole vectors: aligned, strides in whole vectors.
template <typename U>
bool vector_rows(const GroupedRows& r) {
  return aligned16(r.data) && r.row_stride % kVectorWidth<U> == 0 && r.group_stride % kVectorWidth<U> == 0;
}

// Whether 16-byte vectors tile every row of every operand, each within one head; `buffers`: the contiguous outputs
// (and grad_out), whose strides are whole vectors once the group's channels are.
template <typename T, typename Y>
bool vectorized(const GatedNormInputs& in, const GatedNormShape& shape, std::initializer_list<const void*> buffers) {
  return vectorizable<T>(shape.channels, buffers) && shape.head_dim % kVectorWidth<T> == 0 && vector_rows<T>(in.x) &&
         vector_rows<T>(in.z) && vector_rows<Y>(in.y);
}

// Blocks per group for a grid that fills the current device with `kernel`'s resident blocks (of
// `threads` threads and `dynamic_shared` bytes of dynamic shared memory).
template <typename Kernel>
int64_t blocks_per_group(Kernel kernel, int threads, const GatedNormShape& shape, size_t dynamic_shared = 0) {
  int device = 0, sms = 1, per_sm = 1;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_shared) != cudaSuccess)
    sms = per_sm = 1;
  const int64_t resident = int64_t{std::max(sms, 1)} * std::max(per_sm, 1);
  return std::max<int64_t>(std::min((resident + shape.groups - 1) / shape.groups, shape.rows), 1);
}

// Calls f(std::bool_constant<v>{}) for the run-time v.
template <typename F>
cudaError_t dispatch_vectorized(bool v, F&& f) {
  return v ? f(std::true_type{}) : f(std::false_type{});
}

}  // namespace triax::mamba2::kernels
