// The selective scan's forward kernel. A thread block takes 32 channels of one sequence and walks
// the sequence in pieces of 32 positions: the piece's inputs are staged in shared memory (fp32,
// coalesced reads of the [b, d, l] rows), then each thread advances its S states position by
// position in registers, the four threads of a channel sum their C . h, and the gated outputs
// leave in coalesced rows. The next piece's inputs are loaded into registers meanwhile. The
// state never touches global memory except for the checkpoints the backward pass asks for
// (every kCheckpointInterval positions) and the last state.
#include "scan_common.cuh"

namespace triax::mamba::kernels {
namespace {

constexpr int kChannels = 32;
constexpr int kThreads = kChannels * kGroups;  // three blocks per SM hold a Mamba-130m batch of 8 at once
constexpr int kPiece = static_cast<int>(kCheckpointInterval);  // a checkpoint before every piece

template <int NS>
struct ForwardTiles {
  StageTiles<kChannels, kPiece, NS> in;
  float y[kChannels][kPiece + 1];  // C . h summed over the states
};

template <typename T, int S>
__global__ void __launch_bounds__(kThreads, 3)
    scan_forward_kernel(ScanOperands in, const float* __restrict__ initial_state, T* __restrict__ y,
                        float* __restrict__ last_state, float* __restrict__ checkpoints) {
  constexpr int NS = S * kGroups;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  auto& tiles = *reinterpret_cast<ForwardTiles<NS>*>(shared_bytes);
  const int64_t b = blockIdx.y, c0 = static_cast<int64_t>(blockIdx.x) * kChannels;
  const int c = threadIdx.x / kGroups, g = threadIdx.x % kGroups;
  const int64_t channel = c0 + c;
  const bool live = channel < in.channels;
  const int64_t n = in.state, l = in.length, checkpoint_stride = (l + kCheckpointInterval - 1) / kCheckpointInterval;

  float A2[S], h[S];  // A * log2(e): exp(dt * A) = 2^(dt * A2)
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int s = g * S + j;
    const bool real = live && s < n;
    A2[j] = real ? in.A[channel * n + s] * kLog2e : 0.f;
    h[j] = real && initial_state ? initial_state[(b * in.channels + channel) * n + s] : 0.f;
  }
  // The piece being computed sits in shared memory while the next one's loads are in flight.
  PieceRegisters<T, kChannels, kPiece, NS, kThreads, false> next;
  auto length_of = [&](int64_t start) { return static_cast<int>(l - start < kPiece ? l - start : kPiece); };
  next.load(in, nullptr, b, c0, 0, length_of(0));

  for (int64_t start = 0; start < l; start += kPiece) {
    const int len = length_of(start);
    next.store(in, c0, len, tiles.in);
    __syncthreads();
    if (start + kPiece < l) next.load(in, nullptr, b, c0, start + kPiece, length_of(start + kPiece));
    if (checkpoints && live) {
      float* out = checkpoints + ((b * in.channels + channel) * checkpoint_stride + start / kCheckpointInterval) * n;
#pragma unroll
      for (int j = 0; j < S; ++j)
        if (g * S + j < n) out[g * S + j] = h[j];
    }
    // The whole piece unrolled, the partial outputs in registers: nothing is stored inside the
    // loop, so the shared-memory loads of later positions run ahead. Positions past the end
    // were staged with dt = 0 and leave the state as it is.
    float y_part[kPiece];
#pragma unroll
    for (int t = 0; t < kPiece; ++t) {
      const float dt = tiles.in.dt[c][t], dt_u = tiles.in.dt_u[c][t];
      float Bt[S], Ct[S];
      load_states(tiles.in.B[t], g, Bt);
      load_states(tiles.in.C[t], g, Ct);
      float acc = 0.f;
#pragma unroll
      for (int j = 0; j < S; ++j) {
        h[j] = fast_exp2(dt * A2[j]) * h[j] + dt_u * Bt[j];
        acc += Ct[j] * h[j];
      }
      y_part[t] = acc;
    }
    // Sum over the channel's four lanes: each keeps a quarter of the positions.
    const int first = sum_over_channel_lanes(y_part, g);
#pragma unroll
    for (int k = 0; k < kPiece / kGroups; ++k) tiles.y[c][first + k] = y_part[k];
    __syncthreads();
    for (int e = threadIdx.x; e < kChannels * kPiece; e += blockDim.x) {
      const int cc = e / kPiece, t = e % kPiece;
      const int64_t ch = c0 + cc;
      if (ch >= in.channels || t >= len) continue;
      const int64_t at = (b * in.channels + ch) * l + start + t;
      float out = tiles.y[cc][t];
      if (in.D) out += in.D[ch] * tiles.in.u[cc][t];
      if (in.z) {
        const float zz = tiles.in.z[cc][t];
        out *= zz / (1.f + __expf(-zz));
      }
      y[at] = from_float<T>(out);
    }
    __syncthreads();
  }
  if (last_state && live) {
#pragma unroll
    for (int j = 0; j < S; ++j)
      if (g * S + j < n) last_state[(b * in.channels + channel) * n + g * S + j] = h[j];
  }
}

}  // namespace

cudaError_t selective_scan_forward(const ScanOperands& in, const float* initial_state, void* y, float* last_state,
                                   float* checkpoints, cudaStream_t stream) {
  if (in.batch == 0 || in.channels == 0 || in.length == 0) return cudaSuccess;
  return dispatch_scan_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_states(in.state, [&](auto states) {
      constexpr int S = decltype(states)::value;
      auto kernel = scan_forward_kernel<T, S>;
      const size_t shared = sizeof(ForwardTiles<S * kGroups>);
      if (shared > 48 * 1024) {
        const cudaError_t status =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
        if (status != cudaSuccess) return status;
      }
      const dim3 grid(static_cast<unsigned>((in.channels + kChannels - 1) / kChannels),
                      static_cast<unsigned>(in.batch));
      kernel<<<grid, kThreads, shared, stream>>>(in, initial_state, static_cast<T*>(y), last_state, checkpoints);
      return cudaGetLastError();
    });
  });
}

}  // namespace triax::mamba::kernels
