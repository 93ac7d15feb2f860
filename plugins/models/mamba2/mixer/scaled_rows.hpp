// Rows scaled by one factor each (scaled_rows.cu): out[row, :] = in[row, :] s[row], the fp32
// product rounded once to the element type as it is stored: the same bits as LibTorch's mul_out
// of in and s[..., None] into an output of in's type. LibTorch's broadcast of a last dim of one
// takes its unvectorised kernel (about a third of the copy bandwidth); this one moves 16 bytes a
// load. Rows are indexed by kScaledRowsDims dims, each tensor at its own strides (in elements),
// so that a permuted view such as the chunks' layout is read or written in place. Raw pointers,
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

}  // namespace triax::mamba2::kernels
