// Rotary position embedding in the "rotate half" layout and its transpose (the backward pass).
// One thread per pair (i, i + head_dim/2) of one (batch, head, position); the operand may be a
// strided view (attention's [batch, seq, heads, head_dim] storage seen as [batch, heads, seq,
// head_dim]) as long as head_dim is contiguous.
#include "kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T, bool kInverse>
__global__ void rotary_kernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                              T* __restrict__ out, RotaryLayout layout, int64_t pairs) {
  const int64_t half = layout.head_dim / 2;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < pairs;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // index = ((b * heads + h) * seq + s) * half + i
    const int64_t i = index % half;
    int64_t rest = index / half;
    const int64_t s = rest % layout.seq;
    rest /= layout.seq;
    const int64_t h = rest % layout.heads;
    const int64_t b = rest / layout.heads;
    const T* x_row = x + b * layout.in_stride[0] + h * layout.in_stride[1] + s * layout.in_stride[2];
    T* out_row = out + b * layout.out_stride[0] + h * layout.out_stride[1] + s * layout.out_stride[2];
    const T* cos_row = cos + s * layout.head_dim;
    const T* sin_row = sin + s * layout.head_dim;

    const float x1 = to_float(x_row[i]), x2 = to_float(x_row[i + half]);
    const float c1 = to_float(cos_row[i]), c2 = to_float(cos_row[i + half]);
    const float s1 = to_float(sin_row[i]), s2 = to_float(sin_row[i + half]);
    // Forward: [o1, o2] = [[c1, -s1], [s2, c2]] [x1, x2]; inverse: the transposed matrix.
    const float o1 = kInverse ? x1 * c1 + x2 * s2 : x1 * c1 - x2 * s1;
    const float o2 = kInverse ? x2 * c2 - x1 * s1 : x2 * c2 + x1 * s2;
    out_row[i] = from_float<T>(o1);
    out_row[i + half] = from_float<T>(o2);
  }
}

}  // namespace

cudaError_t rotary(Dtype dtype, const void* x, const void* cos, const void* sin, void* out, const RotaryLayout& layout,
                   bool inverse, cudaStream_t stream) {
  const int64_t pairs = layout.batch * layout.heads * layout.seq * (layout.head_dim / 2);
  if (pairs == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xt = static_cast<const T*>(x);
    const T* ct = static_cast<const T*>(cos);
    const T* st = static_cast<const T*>(sin);
    T* ot = static_cast<T*>(out);
    const unsigned grid = grid_for(pairs, kThreads);
    if (inverse)
      rotary_kernel<T, true><<<grid, kThreads, 0, stream>>>(xt, ct, st, ot, layout, pairs);
    else
      rotary_kernel<T, false><<<grid, kThreads, 0, stream>>>(xt, ct, st, ot, layout, pairs);
    return cudaGetLastError();
  });
}

}  // namespace triax::kernels
