// Rows at strides, scaled or summed (scaled_rows.hpp). One thread per kScaledRowsVector values of
// a row: its row index decomposed once, its operands loaded (16-byte vectors) before any is used,
// the results rounded once as they are stored. Nothing is reduced: the same bits on every run and
// as LibTorch's product (sum).
#include "scaled_rows.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using triax::kernels::dispatch_dtype;
using triax::kernels::load_floats;
using triax::kernels::store_floats;

constexpr int kThreads = 256;
constexpr int kVector = static_cast<int>(kScaledRowsVector);

// A row's offsets in the two operands (in and scale, or a and b) and in out.
struct RowOffsets {
  int64_t in, scale, out;
};

// The offsets of row `row` (the index space's last dim fastest) in the three tensors.
__device__ __forceinline__ RowOffsets row_offsets(unsigned row, const ScaledRowsShape& shape, const RowStrides& in,
                                                  const RowStrides& scale, const RowStrides& out) {
  RowOffsets o{0, 0, 0};
#pragma unroll
  for (int d = kScaledRowsDims - 1; d >= 0; --d) {
    const unsigned size = static_cast<unsigned>(shape.rows[d]);
    const int64_t i = d == 0 ? row : row % size;
    row = d == 0 ? 0 : row / size;
    o.in += i * in.dim[d];
    o.scale += i * scale.dim[d];
    o.out += i * out.dim[d];
  }
  return o;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    scaled_rows_kernel(const T* __restrict__ in, RowStrides in_strides, const float* __restrict__ scale,
                       RowStrides scale_strides, T* __restrict__ out, RowStrides out_strides, ScaledRowsShape shape,
                       unsigned vectors, unsigned vectors_per_row) {
  const unsigned index = blockIdx.x * kThreads + threadIdx.x;
  if (index >= vectors) return;
  const unsigned row = index / vectors_per_row, column = (index % vectors_per_row) * kVector;
  const RowOffsets o = row_offsets(row, shape, in_strides, scale_strides, out_strides);
  float values[kVector];  // one 16-byte load (bf16, fp16) or two (fp32)
  load_floats<T, kVector>(in + o.in + column, values);
  const float s = scale[o.scale];
#pragma unroll
  for (int e = 0; e < kVector; ++e) values[e] = __fmul_rn(values[e], s);
  store_floats<T, kVector>(out + o.out + column, values);
}

// out = a + b: both rows loaded, the fp32 sum rounded once (LibTorch's add with alpha 1 computes
// a + 1 * b in fp32: the same value).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    summed_rows_kernel(const T* __restrict__ a, RowStrides a_strides, const T* __restrict__ b, RowStrides b_strides,
                       T* __restrict__ out, RowStrides out_strides, ScaledRowsShape shape, unsigned vectors,
                       unsigned vectors_per_row) {
  const unsigned index = blockIdx.x * kThreads + threadIdx.x;
  if (index >= vectors) return;
  const unsigned row = index / vectors_per_row, column = (index % vectors_per_row) * kVector;
  const RowOffsets o = row_offsets(row, shape, a_strides, b_strides, out_strides);
  float first[kVector], second[kVector];
  load_floats<T, kVector>(a + o.in + column, first);
  load_floats<T, kVector>(b + o.scale + column, second);
#pragma unroll
  for (int e = 0; e < kVector; ++e) first[e] = __fadd_rn(first[e], second[e]);
  store_floats<T, kVector>(out + o.out + column, first);
}

// The vectors of `shape` (scaled_rows_takes has held: within int32).
unsigned vectors_of(const ScaledRowsShape& shape) {
  unsigned vectors = static_cast<unsigned>(shape.width / kScaledRowsVector);
  for (int d = 0; d < kScaledRowsDims; ++d) vectors *= static_cast<unsigned>(shape.rows[d]);
  return vectors;
}

}  // namespace

bool scaled_rows_takes(const void* in, const RowStrides& in_strides, const void* out, const RowStrides& out_strides,
                       const ScaledRowsShape& shape) {
  if (shape.width <= 0 || shape.width % kScaledRowsVector != 0) return false;
  if (!triax::kernels::aligned16(in) || !triax::kernels::aligned16(out)) return false;
  int64_t vectors = shape.width / kScaledRowsVector;
  for (int d = 0; d < kScaledRowsDims; ++d) {
    if (shape.rows[d] <= 0 || in_strides.dim[d] % kScaledRowsVector != 0 || out_strides.dim[d] % kScaledRowsVector != 0)
      return false;
    vectors *= shape.rows[d];
    if (vectors > INT32_MAX) return false;
  }
  return true;
}

cudaError_t scaled_rows(triax::kernels::Dtype dtype, const void* in, const RowStrides& in_strides, const float* scale,
                        const RowStrides& scale_strides, void* out, const RowStrides& out_strides,
                        const ScaledRowsShape& shape, cudaStream_t stream) {
  if (!scaled_rows_takes(in, in_strides, out, out_strides, shape)) return cudaErrorInvalidValue;
  const unsigned vectors_per_row = static_cast<unsigned>(shape.width / kScaledRowsVector);
  const unsigned vectors = vectors_of(shape);
  const unsigned blocks = (vectors + kThreads - 1) / kThreads;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scaled_rows_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(in), in_strides, scale,
                                                           scale_strides, static_cast<T*>(out), out_strides, shape,
                                                           vectors, vectors_per_row);
    return cudaGetLastError();
  });
}

bool summed_rows_takes(const void* a, const RowStrides& a_strides, const void* b, const RowStrides& b_strides,
                       const void* out, const RowStrides& out_strides, const ScaledRowsShape& shape) {
  return scaled_rows_takes(a, a_strides, out, out_strides, shape) &&
         scaled_rows_takes(b, b_strides, out, out_strides, shape);
}

cudaError_t summed_rows(triax::kernels::Dtype dtype, const void* a, const RowStrides& a_strides, const void* b,
                        const RowStrides& b_strides, void* out, const RowStrides& out_strides,
                        const ScaledRowsShape& shape, cudaStream_t stream) {
  if (!summed_rows_takes(a, a_strides, b, b_strides, out, out_strides, shape)) return cudaErrorInvalidValue;
  const unsigned vectors_per_row = static_cast<unsigned>(shape.width / kScaledRowsVector);
  const unsigned vectors = vectors_of(shape);
  const unsigned blocks = (vectors + kThreads - 1) / kThreads;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    summed_rows_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a), a_strides,
                                                           static_cast<const T*>(b), b_strides, static_cast<T*>(out),
                                                           out_strides, shape, vectors, vectors_per_row);
    return cudaGetLastError();
  });
}

}  // namespace triax::mamba2::kernels
