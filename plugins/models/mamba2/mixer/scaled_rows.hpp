// Rows at strides, elementwise (scaled_rows.cu): rows scaled by one factor each, out[row, :] =
// in[row, :] s[row], and rows summed, out[row, :] = a[row, :] + b[row, :]; the fp32 result rounded
// once to the element type as it is stored: the same bits as LibTorch's mul_out of in and
// s[..., None] (add_out of a and b) into an output of that type. LibTorch takes its unvectorised
// kernel for a broadcast of a last dim of one and for a strided output (about a third of the copy
// bandwidth); these move 16 bytes a load. Rows are indexed by kScaledRowsDims dims, each tensor at
// its own strides (in elements), so that a permuted view such as the chunks' layout, or a slot of
// a wider tensor such as the packed SSD gradient's x, is read or written in place. Raw pointers,
// the caller's stream; no LibTorch header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "triax/kernels/kernels.hpp"

namespace triax::mamba2::kernels {

constexpr int kScaledRowsDims = 5;
// Values a thread moves, and so the multiple of it that rows, strides and alignment must be.
constexpr int64_t kScaledRowsVector = 8;

struct RowStrides {
  int64_t dim[kScaledRowsDims];  // a unit stride within the row is implied
};

struct ScaledRowsShape {
  int64_t rows[kScaledRowsDims];  // the row index space, its last dim fastest
  int64_t width;                  // values a row, a multiple of kScaledRowsVector
};

// Whether scaled_rows takes these: the width and in's and out's row strides multiples of
// kScaledRowsVector, both pointers 16-byte aligned, every size positive and the values, counted in
// vectors, within int32 (the kernel decomposes its index in int32).
bool scaled_rows_takes(const void* in, const RowStrides& in_strides, const void* out, const RowStrides& out_strides,
                       const ScaledRowsShape& shape);

// in and out in `dtype` (fp32, bf16 or fp16), scale fp32 at scale_strides (any). Returns
// cudaErrorInvalidValue where scaled_rows_takes does not hold.
cudaError_t scaled_rows(triax::kernels::Dtype dtype, const void* in, const RowStrides& in_strides, const float* scale,
                        const RowStrides& scale_strides, void* out, const RowStrides& out_strides,
                        const ScaledRowsShape& shape, cudaStream_t stream);

// Whether summed_rows takes these: scaled_rows_takes for each of a and b with out.
bool summed_rows_takes(const void* a, const RowStrides& a_strides, const void* b, const RowStrides& b_strides,
                       const void* out, const RowStrides& out_strides, const ScaledRowsShape& shape);

// out = a + b, all three in `dtype` (fp32, bf16 or fp16), each at its own row strides. Returns
// cudaErrorInvalidValue where summed_rows_takes does not hold.
cudaError_t summed_rows(triax::kernels::Dtype dtype, const void* a, const RowStrides& a_strides, const void* b,
                        const RowStrides& b_strides, void* out, const RowStrides& out_strides,
                        const ScaledRowsShape& shape, cudaStream_t stream);

}  // namespace triax::mamba2::kernels
