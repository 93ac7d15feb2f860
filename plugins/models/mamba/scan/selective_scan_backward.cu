// The selective scan's backward kernel. A thread block takes 16 channels of one sequence and walks
// the sequence backwards in pieces of kCheckpointInterval positions. For each piece it stages the
// inputs (as the forward does, the previous piece's loads in flight meanwhile), recomputes the
// states from the forward's checkpoint keeping them in shared memory, forms the gate's gradients,
// and then runs the adjoint recurrence
//   g_t = dy_t C_t + exp(dt_{t+1} A) g_{t+1}
// back through the piece with g in registers. The gradients of B and C (sums over channels) are
// summed over a warp's 8 channels by a butterfly reduce-scatter, over the block's warps in shared
// memory, and over the channel tiles with one atomic add per (position, state) and block.
#include "scan_common.cuh"

namespace triax::mamba::kernels {
namespace {

constexpr int kChannels = 16;
constexpr int kThreads = kChannels * kGroups;
constexpr int kWarps = kThreads / 32;
constexpr int kPiece = static_cast<int>(kCheckpointInterval);

template <int S>
struct BackwardTiles {
  static constexpr int NS = S * kGroups;
  StageTiles<kChannels, kPiece, NS> in;
  float dy[kChannels][kPiece + 1];  // first C . h, then the gradient of the ungated y
  float du[kChannels][kPiece + 1];
  float ddelta[kChannels][kPiece + 1];
  float bc_grad[kWarps][kPiece][2 * NS];           // dB | dC summed over each warp's channels
  alignas(16) float states[kPiece][kThreads * S];  // h_t of every thread's states
};

// Sums v (V values per lane) over the lanes that differ in bits 2..4 (the warp's 8 channels):
// each halving round keeps half the values and adds the partner's. Afterwards the lane holds
// max(V / 8, 1) sums, those of the values first..; `writer` is false on lanes holding a
// duplicate (V < 8).
template <int V>
__device__ __forceinline__ void reduce_over_channels(float (&v)[V], int lane, int& first, bool& writer) {
  first = 0;
  writer = true;
  int count = V;
#pragma unroll
  for (int mask = 16; mask >= 4; mask >>= 1) {
    const bool high = lane & mask;
    if (count > 1) {
      count /= 2;
      first += keep_half_summed(v, count, mask, high);
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], mask);
      if (high) writer = false;
    }
  }
}

template <typename T, int S>
__global__ void __launch_bounds__(kThreads) scan_backward_kernel(ScanOperands in, const float* __restrict__ checkpoints,
                                                                 const T* __restrict__ grad_y, ScanGradients out) {
  constexpr int NS = S * kGroups;
  constexpr int V = 2 * S;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  auto& tiles = *reinterpret_cast<BackwardTiles<S>*>(shared_bytes);
  const int64_t b = blockIdx.y, c0 = static_cast<int64_t>(blockIdx.x) * kChannels;
  const int c = threadIdx.x / kGroups, g = threadIdx.x % kGroups, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t channel = c0 + c;
  const bool live = channel < in.channels;
  const int64_t n = in.state, l = in.length, pieces = (l + kCheckpointInterval - 1) / kCheckpointInterval;
  T* du_out = static_cast<T*>(out.du);
  T* ddelta_out = static_cast<T*>(out.ddelta);
  T* dz_out = static_cast<T*>(out.dz);
  const float D = live && in.D ? in.D[channel] : 0.f;

  float A[S], A2[S], dA[S], adj[S], decay_next[S];
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int s = g * S + j;
    A[j] = live && s < n ? in.A[channel * n + s] : 0.f;
    A2[j] = A[j] * kLog2e;
    dA[j] = 0.f;
    adj[j] = 0.f;         // g_{t+1}
    decay_next[j] = 0.f;  // exp(dt_{t+1} A)
  }
  float dD = 0.f, ddelta_bias = 0.f;

  // The piece being computed sits in shared memory while the previous one's loads (and its
  // checkpoint) are in flight.
  PieceRegisters<T, kChannels, kPiece, NS, kThreads, true> next;
  auto length_of = [&](int64_t start) { return static_cast<int>(l - start < kPiece ? l - start : kPiece); };
  float next_h0[S];
  auto load_piece = [&](int64_t piece) {
    next.load(in, grad_y, b, c0, piece * kPiece, length_of(piece * kPiece));
#pragma unroll
    for (int j = 0; j < S; ++j) {
      const int s = g * S + j;
      next_h0[j] = live && s < n ? checkpoints[((b * in.channels + channel) * pieces + piece) * n + s] : 0.f;
    }
  };
  load_piece(pieces - 1);

  for (int64_t piece = pieces - 1; piece >= 0; --piece) {
    const int64_t start = piece * kPiece;
    const int len = length_of(start);
    next.store(in, c0, len, tiles.in);
    float h0[S], h[S];
#pragma unroll
    for (int j = 0; j < S; ++j) h0[j] = h[j] = next_h0[j];
    __syncthreads();
    if (piece > 0) load_piece(piece - 1);

      // The states of the piece from its checkpoint, and C . h.
#pragma unroll 4
    for (int t = 0; t < len; ++t) {
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
      store_states(tiles.states[t], threadIdx.x, h);
      acc = channel_sum(acc);
      if (g == 0) tiles.dy[c][t] = acc;
    }
    __syncthreads();

    // The gate: out = y * silu(z) with y = C . h + D u.
    for (int e = threadIdx.x; e < kChannels * kPiece; e += blockDim.x) {
      const int cc = e / kPiece, t = e % kPiece;
      const int64_t ch = c0 + cc;
      float dy = 0.f;
      if (ch < in.channels && t < len) {
        const int64_t at = (b * in.channels + ch) * l + start + t;
        const float grad = tiles.in.grad[cc][t];
        if (in.z) {
          const float y = tiles.dy[cc][t] + (in.D ? in.D[ch] : 0.f) * tiles.in.u[cc][t];
          const float zz = tiles.in.z[cc][t];
          const float sig = 1.f / (1.f + __expf(-zz));
          dz_out[at] = from_float<T>(grad * y * sig * (1.f + zz * (1.f - sig)));
          dy = grad * zz * sig;
        } else {
          dy = grad;
        }
      }
      tiles.dy[cc][t] = dy;
    }
    __syncthreads();

    // The adjoint recurrence, back through the piece; `current` holds h_t, `prev` h_{t-1}.
    float current[S];
    load_states(tiles.states[len - 1], threadIdx.x, current);
#pragma unroll 2
    for (int t = len - 1; t >= 0; --t) {
      const float dt = tiles.in.dt[c][t], dt_u = tiles.in.dt_u[c][t], u = tiles.in.u[c][t], dy = tiles.dy[c][t];
      float Bt[S], Ct[S], prev[S];
      load_states(tiles.in.B[t], g, Bt);
      load_states(tiles.in.C[t], g, Ct);
      if (t > 0) {
        load_states(tiles.states[t - 1], threadIdx.x, prev);
      } else {
#pragma unroll
        for (int j = 0; j < S; ++j) prev[j] = h0[j];
      }
      float du = 0.f, ddt = 0.f, v[V];
#pragma unroll
      for (int j = 0; j < S; ++j) {
        const float adjoint = decay_next[j] * adj[j] + dy * Ct[j];  // dL/dh_t
        const float decay = fast_exp2(dt * A2[j]);
        const float decayed = decay * prev[j];  // exp(dt A) h_{t-1}
        du += adjoint * Bt[j];
        ddt += adjoint * (A[j] * decayed + Bt[j] * u);
        dA[j] += adjoint * dt * decayed;
        v[j] = adjoint * dt_u;       // dB
        v[S + j] = dy * current[j];  // dC
        adj[j] = adjoint;
        decay_next[j] = decay;
        current[j] = prev[j];
      }
      du = channel_sum(du * dt);
      ddt = channel_sum(ddt);
      if (g == 0) {
        const float dd = ddt * tiles.in.slope[c][t];
        tiles.du[c][t] = du + dy * D;
        tiles.ddelta[c][t] = dd;
        dD += dy * u;
        ddelta_bias += dd;
      }
      int first;
      bool writer;
      reduce_over_channels(v, lane, first, writer);
      if (writer) {
#pragma unroll
        for (int k = 0; k < (V / 8 > 0 ? V / 8 : 1); ++k) {
          const int index = first + k;  // index < S: dB of state g*S + index, else dC of g*S + index - S
          const int slot = index < S ? g * S + index : NS + g * S + index - S;
          tiles.bc_grad[warp][t][slot] = v[k];
        }
      }
    }
    __syncthreads();

    for (int e = threadIdx.x; e < kChannels * kPiece; e += blockDim.x) {
      const int cc = e / kPiece, t = e % kPiece;
      const int64_t ch = c0 + cc;
      if (ch >= in.channels || t >= len) continue;
      const int64_t at = (b * in.channels + ch) * l + start + t;
      du_out[at] = from_float<T>(tiles.du[cc][t]);
      ddelta_out[at] = from_float<T>(tiles.ddelta[cc][t]);
    }
    for (int e = threadIdx.x; e < 2 * NS * kPiece; e += blockDim.x) {
      const int which = e / (NS * kPiece), s = (e / kPiece) % NS, t = e % kPiece;
      if (s >= n || t >= len) continue;
      float sum = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += tiles.bc_grad[w][t][which * NS + s];
      atomicAdd((which ? out.dC : out.dB) + (b * n + s) * l + start + t, sum);
    }
    __syncthreads();
  }

  if (live) {
#pragma unroll
    for (int j = 0; j < S; ++j)
      if (g * S + j < n) atomicAdd(out.dA + channel * n + g * S + j, dA[j]);
    if (g == 0 && out.dD) atomicAdd(out.dD + channel, dD);
    if (g == 0 && out.ddelta_bias) atomicAdd(out.ddelta_bias + channel, ddelta_bias);
  }
}

}  // namespace

cudaError_t selective_scan_backward(const ScanOperands& in, const float* checkpoints, const void* grad_y,
                                    const ScanGradients& out, cudaStream_t stream) {
  if (in.batch == 0 || in.channels == 0 || in.length == 0) return cudaSuccess;
  return dispatch_scan_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_states(in.state, [&](auto states) {
      constexpr int S = decltype(states)::value;
      auto kernel = scan_backward_kernel<T, S>;
      const size_t shared = sizeof(BackwardTiles<S>);
      if (const cudaError_t status = triax::kernels::allow_dynamic_shared_memory(kernel, shared); status != cudaSuccess)
        return status;
      const dim3 grid(static_cast<unsigned>((in.channels + kChannels - 1) / kChannels),
                      static_cast<unsigned>(in.batch));
      kernel<<<grid, kThreads, shared, stream>>>(in, checkpoints, static_cast<const T*>(grad_y), out);
      return cudaGetLastError();
    });
  });
}

}  // namespace triax::mamba::kernels
