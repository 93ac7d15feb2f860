// The intra-chunk decay mask times the scores C B^T (ssd_kernels.hpp), forward and backward,
// without the fp32 [b, c, g, r, q, q] mask and products LibTorch's composition keeps. The
// backward gives each thread one column of a tile and each warp every eighth row, so every sum
// is taken in one fixed order: the same bits on every run.
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

using triax::kernels::from_float;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename O>
__global__ void masked_scores_kernel(const float* __restrict__ decay, const float* __restrict__ scores,
                                     O* __restrict__ out, ChunkShape s) {
  const int64_t q = s.positions, total = s.blocks * s.heads * q * q;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e % q, i = (e / q) % q, head = e / (q * q), block = head / s.heads;
    float v = 0.f;
    if (i >= j) {
      const float* d = decay + head * q;
      v = expf(d[i] - d[j]) * scores[(block * q + i) * q + j];
    }
    out[e] = from_float<O>(v);
  }
}

// One block per (chunk block, column tile). shared: [kWarps][r][kScoreTile] column sums.
template <typename O>
__global__ void masked_scores_backward_kernel(const float* __restrict__ d_masked, const float* __restrict__ decay,
                                              const float* __restrict__ scores, O* __restrict__ dscores,
                                              float* __restrict__ row_partials, float* __restrict__ column_sums,
                                              ChunkShape s) {
  extern __shared__ float columns[];
  const int64_t q = s.positions, r = s.heads, tiles = (q + kScoreTile - 1) / kScoreTile;
  const int64_t block = blockIdx.x / tiles, tile = blockIdx.x % tiles, first = tile * kScoreTile;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t t = first + lane;
  const bool inside = t < q;
  float* own = columns + static_cast<int64_t>(warp) * r * kScoreTile;
  for (int64_t h = 0; h < r; ++h) own[h * kScoreTile + lane] = 0.f;
  for (int64_t i = warp; i < q; i += kWarps) {
    float sum = 0.f;
    if (i >= first) {  // rows above the tile are masked out entirely
      const float score = inside ? scores[(block * q + i) * q + t] : 0.f;
      for (int64_t h = 0; h < r; ++h) {
        const int64_t head = block * r + h;
        const float* d = decay + head * q;
        const float w = inside && i >= t ? d_masked[(head * q + i) * q + t] * expf(d[i] - d[t]) : 0.f;
        sum += w;
        const float g = w * score;
        own[h * kScoreTile + lane] += g;
        const float row = triax::kernels::warp_reduce(g, triax::kernels::SumOp{});
        if (lane == 0) row_partials[(head * q + i) * tiles + tile] = row;
      }
    }
    if (inside) dscores[(block * q + i) * q + t] = from_float<O>(sum);
  }
  __syncthreads();
  for (int64_t k = threadIdx.x; k < r * kScoreTile; k += blockDim.x) {
    const int64_t h = k / kScoreTile, c = first + k % kScoreTile;
    float total = 0.f;
    for (int w = 0; w < kWarps; ++w) total += columns[(w * r + h) * kScoreTile + k % kScoreTile];
    if (c < q) column_sums[(block * r + h) * q + c] = total;
  }
}

}  // namespace

cudaError_t masked_scores(triax::kernels::Dtype operand, const float* decay, const float* scores, void* out,
                          const ChunkShape& shape, cudaStream_t stream) {
  const int64_t total = shape.blocks * shape.heads * shape.positions * shape.positions;
  if (total == 0) return cudaSuccess;
  return triax::kernels::dispatch_dtype(operand, [&](auto tag) {
    using O = typename decltype(tag)::type;
    const unsigned grid = triax::kernels::grid_for(total, kThreads, int64_t{1} << 20);
    masked_scores_kernel<O><<<grid, kThreads, 0, stream>>>(decay, scores, static_cast<O*>(out), shape);
    return cudaGetLastError();
  });
}

cudaError_t masked_scores_backward(triax::kernels::Dtype operand, const float* d_masked, const float* decay,
                                   const float* scores, void* dscores, float* row_partials, float* column_sums,
                                   const ChunkShape& shape, cudaStream_t stream) {
  if (shape.blocks * shape.heads * shape.positions == 0) return cudaSuccess;
  return triax::kernels::dispatch_dtype(operand, [&](auto tag) {
    using O = typename decltype(tag)::type;
    const auto kernel = masked_scores_backward_kernel<O>;
    const size_t shared = sizeof(float) * kWarps * kScoreTile * static_cast<size_t>(shape.heads);
    const cudaError_t allowed = triax::kernels::allow_dynamic_shared_memory(kernel, shared);
    if (allowed != cudaSuccess) return allowed;
    const int64_t tiles = (shape.positions + kScoreTile - 1) / kScoreTile;
    kernel<<<static_cast<unsigned>(shape.blocks * tiles), kThreads, shared, stream>>>(
        d_masked, decay, scores, static_cast<O*>(dscores), row_partials, column_sums, shape);
    return cudaGetLastError();
  });
}

}  // namespace triax::mamba2::kernels
