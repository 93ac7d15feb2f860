// SwiGLU's backward written straight into fp8 (docs/fp8.md, "SwiGLU's gradient in fp8"): the
// gradient of a fused gate/up projection's output, [rows, 2 x cols], scaled by the multiplier and
// rounded to fp8 in both layouts the gate/up product's backward reads, without the bf16 tensor
// that the scaling kernel (fp8_cast.cu) would read back. Each gradient is rounded to T first, as
// swiglu.cu stores it, so the bytes are those of swiglu_backward then scale_to_fp8. A block takes
// 128 rows x 64 columns of gate and of up (fp8_tiles.cuh): grad_y, gate and up read once, the
// gate and up tiles of the gradient stored row-major from registers and transposed through
// shared memory.
#include <cuda_fp8.h>

#include "fp8_tiles.cuh"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int64_t kMaxRowBlocks = 65535;  // gridDim.y's limit

// out [rows, 2 cols] (gate's gradient, then up's), out_t [2 cols, rows]. rows % 16 == 0,
// cols % 8 == 0, grad_y, gate, up and out_t 16-byte aligned, in_stride % 8 == 0 (launcher).
template <typename T, typename F>
__global__ void __launch_bounds__(fp8_tiles::kThreads)
    swiglu_backward_fp8_tiles_kernel(const T* __restrict__ grad_y, const T* __restrict__ gate, const T* __restrict__ up,
                                     int64_t in_stride, const float* __restrict__ multiplier, uint8_t* __restrict__ out,
                                     uint8_t* __restrict__ out_t, int64_t rows, int64_t cols) {
  __shared__ __align__(16) fp8_tiles::TransposedTile gate_tile, up_tile;
  const int t = threadIdx.x, group = t % 8, word = t / 8;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * fp8_tiles::kTileCols, c = c0 + group * 8;
  const float m = *multiplier;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * fp8_tiles::kTileRows; r0 < rows;
       r0 += static_cast<int64_t>(gridDim.y) * fp8_tiles::kTileRows) {
    uint32_t gate_words[8] = {0, 0, 0, 0, 0, 0, 0, 0}, up_words[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = r0 + word * 4 + i;
      if (r >= rows || c >= cols) continue;
      float d[8], g[8], u[8];
      fp8_tiles::load8(grad_y + r * cols + c, d);
      fp8_tiles::load8(gate + r * in_stride + c, g);
      fp8_tiles::load8(up + r * in_stride + c, u);
      Pack<uint8_t, 8> qg, qu;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const SwigluGradients grads = swiglu_gradients(d[k], g[k], u[k]);
        qg.v[k] = F(rounded_to<T>(grads.gate) * m).__x;
        qu.v[k] = F(rounded_to<T>(grads.up) * m).__x;
        gate_words[k] |= static_cast<uint32_t>(qg.v[k]) << (8 * i);
        up_words[k] |= static_cast<uint32_t>(qu.v[k]) << (8 * i);
      }
      store_pack<uint8_t, 8>(out + r * 2 * cols + c, qg);
      store_pack<uint8_t, 8>(out + r * 2 * cols + cols + c, qu);
    }
    fp8_tiles::stage_words(gate_tile, gate_words, t);
    fp8_tiles::stage_words(up_tile, up_words, t);
    __syncthreads();
    fp8_tiles::store_transposed(gate_tile, out_t, r0, c0, rows, cols, t);
    fp8_tiles::store_transposed(up_tile, out_t + cols * rows, r0, c0, rows, cols, t);
    __syncthreads();
  }
}

}  // namespace

bool swiglu_backward_to_fp8_applies(int64_t rows, int64_t cols, int64_t in_stride, const void* grad_y, const void* gate,
                                    const void* up, const void* out, const void* out_t) {
  return rows % 16 == 0 && cols % 8 == 0 && in_stride % 8 == 0 && aligned16(grad_y) && aligned16(gate) &&
         aligned16(up) && reinterpret_cast<std::uintptr_t>(out) % 8 == 0 && aligned16(out_t) && out != nullptr &&
         out_t != nullptr;
}

cudaError_t swiglu_backward_to_fp8(Dtype dtype, const void* grad_y, const void* gate, const void* up, int64_t in_stride,
                                   const float* multiplier, bool e5m2, void* out, void* out_t, int64_t rows,
                                   int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (!swiglu_backward_to_fp8_applies(rows, cols, in_stride, grad_y, gate, up, out, out_t))
    return cudaErrorInvalidValue;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel) {
      const dim3 grid(static_cast<unsigned>((cols + fp8_tiles::kTileCols - 1) / fp8_tiles::kTileCols),
                      static_cast<unsigned>(
                          std::min<int64_t>((rows + fp8_tiles::kTileRows - 1) / fp8_tiles::kTileRows, kMaxRowBlocks)));
      kernel<<<grid, fp8_tiles::kThreads, 0, stream>>>(
          static_cast<const T*>(grad_y), static_cast<const T*>(gate), static_cast<const T*>(up), in_stride, multiplier,
          static_cast<uint8_t*>(out), static_cast<uint8_t*>(out_t), rows, cols);
      return cudaGetLastError();
    };
    return e5m2 ? launch(swiglu_backward_fp8_tiles_kernel<T, __nv_fp8_e5m2>)
                : launch(swiglu_backward_fp8_tiles_kernel<T, __nv_fp8_e4m3>);
  });
}

}  // namespace triax::kernels
