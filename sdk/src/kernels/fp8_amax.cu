// The tensorwise fp8 scale of a whole tensor in one launch (fp8_matmul.cpp's quantise): max |x|
// by block partial maxima, the last block to finish reducing them (an integer ticket, no float
// atomics) and turning the amax into the scale and the multiplier. It replaces LibTorch's
// reduction and the five elementwise kernels that followed it, with the same arithmetic:
//   amax'      = max(amax, floor)            (NaN stays NaN, as clamp_min)
//   scale      = amax' x fp32(1 / largest)   (LibTorch's division of a CUDA tensor by a scalar)
//   multiplier = fp32(1 / amax') x largest
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kAmaxThreads = 512;

// max that keeps NaN, as LibTorch's max reduction does (fmaxf would drop it).
struct NanMaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return (a != a || a > b) ? a : b; }
};

template <typename T, int N>
__device__ float thread_amax(const T* __restrict__ x, int64_t packs) {
  float m = 0.0f;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T, N> in = load_pack<T, N>(x + p * N);
#pragma unroll
    for (int k = 0; k < N; ++k) m = NanMaxOp()(fabsf(to_float(in.v[k])), m);
  }
  return m;
}

// out: {scale, multiplier, amax}; partials: gridDim.x floats; tickets: zero before the launch.
template <typename T, int N>
__global__ void __launch_bounds__(kAmaxThreads)
    fp8_tensor_scale_kernel(const T* __restrict__ x, int64_t packs, float largest, float amax_floor, float* partials,
                            unsigned* tickets, float* out) {
  __shared__ float scratch[33];
  __shared__ bool last;
  const float block_max = block_reduce(thread_amax<T, N>(x, packs), scratch, NanMaxOp(), 0.0f);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = block_max;
    __threadfence();  // the partial is visible before the ticket counts it
    last = atomicAdd(tickets, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float m = 0.0f;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) m = NanMaxOp()(__ldcg(partials + b), m);
  m = block_reduce(m, scratch, NanMaxOp(), 0.0f);
  if (threadIdx.x != 0) return;
  const float floored = m != m ? m : fmaxf(m, amax_floor);
  out[0] = __fmul_rn(floored, __fdiv_rn(1.0f, largest));
  out[1] = __fmul_rn(__fdiv_rn(1.0f, floored), largest);
  out[2] = m;
}

}  // namespace

cudaError_t fp8_tensor_scale(Dtype dtype, const void* x, int64_t count, float largest, float amax_floor,
                             float* workspace, float* out, cudaStream_t stream) {
  auto* tickets = reinterpret_cast<unsigned*>(workspace + kFp8ScaleBlocks);
  const cudaError_t cleared = cudaMemsetAsync(tickets, 0, sizeof(unsigned), stream);
  if (cleared != cudaSuccess) return cleared;
  return dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel, int64_t packs) {
      const unsigned blocks = grid_for(packs, kAmaxThreads * int64_t{4}, kFp8ScaleBlocks);
      kernel<<<blocks, kAmaxThreads, 0, stream>>>(static_cast<const T*>(x), packs, largest, amax_floor, workspace,
                                                  tickets, out);
      return cudaGetLastError();
    };
    constexpr int N = kVectorWidth<T>;
    return count % N == 0 && aligned16(x) ? launch(fp8_tensor_scale_kernel<T, N>, count / N)
                                          : launch(fp8_tensor_scale_kernel<T, 1>, count);
  });
}

}  // namespace triax::kernels
