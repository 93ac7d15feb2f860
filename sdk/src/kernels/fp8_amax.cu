// The tensorwise fp8 scale of a whole tensor in one launch (fp8_matmul.cpp's quantise): max |x|
// by block partial maxima, the last block to finish reducing them (an integer ticket, no float
// atomics) and turning the amax into the scale and the multiplier. It replaces LibTorch's
// reduction and the five elementwise kernels that followed it, with the same arithmetic
// (kernel_utils.cuh's fp8_scale_of).
// The same scale from the amax slots a producer kernel filled (rms_norm.cu, swiglu.cu) is one warp.
#include "triax/kernels/kernel_utils.cuh"

namespace triax::kernels {
namespace {

constexpr int kAmaxThreads = 512;

// out = {scale, multiplier, amax} from the amax (kernel_utils.cuh's fp8_scale_of).
__device__ __forceinline__ void write_scale(float amax, float largest, float amax_floor, float* out) {
  const Fp8Scale s = fp8_scale_of(amax, largest, amax_floor);
  out[0] = s.scale;
  out[1] = s.multiplier;
  out[2] = amax;
}

template <typename T, int N>
__device__ float thread_amax(const T* __restrict__ x, int64_t packs) {
  float m = 0.0f;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Pack<T, N> in = load_pack<T, N>(x + p * N);
#pragma unroll
    for (int k = 0; k < N; ++k) m = abs_max(m, to_float(in.v[k]));
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
  if (threadIdx.x == 0) write_scale(m, largest, amax_floor, out);
}

// One warp: the slots' max (a producer's amax, kernel_utils.cuh's fold_block_amax), then the scale.
__global__ void fp8_scale_from_amax_slots_kernel(const float* __restrict__ slots, float largest, float amax_floor,
                                                 float* out) {
  static_assert(kAmaxSlots == 32, "one slot per lane");
  const float m = warp_reduce(slots[threadIdx.x], NanMaxOp());
  if (threadIdx.x == 0) write_scale(m, largest, amax_floor, out);
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

cudaError_t fp8_scale_from_amax_slots(const float* amax_slots, float largest, float amax_floor, float* out,
                                      cudaStream_t stream) {
  fp8_scale_from_amax_slots_kernel<<<1, kAmaxSlots, 0, stream>>>(amax_slots, largest, amax_floor, out);
  return cudaGetLastError();
}

}  // namespace triax::kernels
