// The selective scan's backward kernel. A thread block takes 16 channels of one sequence (G lanes
// each, as the forward: dispatch_layout) and walks
// the sequence backwards in pieces of kCheckpointInterval positions. For each piece it stages the
// inputs (as the forward does, the previous piece's loads in flight meanwhile), recomputes the
// states from the forward's checkpoint keeping them in shared memory, forms the gate's gradients,
// and then runs the adjoint recurrence
//   g_t = dy_t C_t + exp(dt_{t+1} A) g_{t+1}
// back through the piece with g in registers. The gradients of B and C (sums over channels) are
// summed over a warp's 32 / G channels by a butterfly reduce-scatter, over the block's warps in shared
// memory, and over the channel tiles with one atomic add per (position, state) and block.
// The template parameter V picks one of the variants of ScanBackwardVariant (scan_kernels.hpp).
#include "scan_common.cuh"

namespace triax::mamba::kernels {
namespace {

constexpr int kChannels = 16;
constexpr int kPiece = static_cast<int>(kCheckpointInterval);
// The positions whose sums over a channel's lanes share one reduce-scatter: a quarter piece. The
// same shuffles per position as half a piece, and 16 fewer partial sums held in registers: at
// n = 16 the kernel then takes 147 registers a thread instead of 199, so three blocks fit an SM
// (registers allowed two, shared memory three) and Mamba-130m's 768 blocks run in two waves on
// 132 SMs instead of three.
constexpr int kSpan = kPiece / 4;

// What each variant changes (ScanBackwardVariant).
template <ScanBackwardVariant V>
struct VariantTraits {
  // dB | dC partial sums a row per state (read along the positions without bank conflicts).
  static constexpr bool kStateRows = V != ScanBackwardVariant::kPositionRows;
  // The adjoint's sums over the states factored (adjoint_position).
  static constexpr bool kFactored = V != ScanBackwardVariant::kPositionRows && V != ScanBackwardVariant::kStateRows;
  // Each quarter piece's shared-memory stores after its last position (recompute_piece, adjoint_piece).
  static constexpr bool kStoresAfterSpan = V == ScanBackwardVariant::kStoresAfterSpan;
};

// The sums of dB | dC a lane holds after reduce_over_channels (2 S values over 32 / G channels).
template <int G, int S>
constexpr int kStateSums = 2 * S* G / 32 > 0 ? 2 * S* G / 32 : 1;

// The slot in a row of tiles.bc_grad of the index-th of a lane's 2 S values: dB of state
// g*S + index, or dC of state g*S + index - S.
template <int G, int S>
__device__ __forceinline__ int state_gradient_slot(int index, int g) {
  return index < S ? g * S + index : S * G + g * S + index - S;
}

template <int G, int S, bool kStateRows>
struct BackwardTiles {
  static constexpr int NS = S * G, kThreads = kChannels * G, kWarps = kThreads / 32;
  StageTiles<kChannels, kPiece, NS> in;
  float dy[kChannels][kPiece + 1];  // first C . h, then the gradient of the ungated y
  float du[kChannels][kPiece + 1];
  float ddelta[kChannels][kPiece + 1];
  // dB | dC summed over each warp's channels: [warp][slot][position] with padded rows, or
  // [warp][position][slot], whose sum over the warps reads one bank 32 times per warp.
  float bc_grad[kWarps][kStateRows ? 2 * NS : kPiece][kStateRows ? kPiece + 1 : 2 * NS];
  alignas(16) float states[kPiece][kThreads * S];  // h_t of every thread's states

  __device__ __forceinline__ float& state_gradient(int warp, int t, int slot) {
    return kStateRows ? bc_grad[warp][slot][t] : bc_grad[warp][t][slot];
  }
  __device__ __forceinline__ float state_gradient(int warp, int t, int slot) const {
    return kStateRows ? bc_grad[warp][slot][t] : bc_grad[warp][t][slot];
  }
};

// Sums v (V values per lane) over the lanes that differ in bits log2(G)..4 (the warp's 32 / G
// channels): each halving round keeps half the values and adds the partner's. Afterwards the
// lane holds max(V G / 32, 1) sums, those of the values first..; `writer` is false on lanes
// holding a duplicate (V < 32 / G).
template <int G, int V>
__device__ __forceinline__ void reduce_over_channels(float (&v)[V], int lane, int& first, bool& writer) {
  first = 0;
  writer = true;
  int count = V;
#pragma unroll
  for (int mask = 16; mask >= G; mask >>= 1) {
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

// One lane's share of the adjoint recurrence: its S states' A, the running adjoint g_{t+1} and
// exp(dt_{t+1} A), and the parameter gradients it sums over the sequence.
template <int S>
struct AdjointLane {
  float A[S], A2[S], dA[S], adj[S], decay_next[S];
  float dD = 0.f, ddelta_bias = 0.f;  // over this lane's share of the channel's positions

  // States g*S .. g*S + S - 1 of `channel` (zeros past n or for a channel past the end).
  __device__ __forceinline__ AdjointLane(const ScanOperands& in, int64_t channel, int g, bool live) {
#pragma unroll
    for (int j = 0; j < S; ++j) {
      const int s = g * S + j;
      A[j] = live && s < in.state ? in.A[channel * in.state + s] : 0.f;
      A2[j] = A[j] * kLog2e;
      dA[j] = 0.f;
      adj[j] = 0.f;
      decay_next[j] = 0.f;
    }
  }

  // Adds the sums to dA, dD and d(delta_bias), once per block; every lane of the block calls it
  // (the G lanes of a channel sum dD and d(delta_bias) first).
  template <int G>
  __device__ __forceinline__ void add_to(const ScanGradients& out, const ScanOperands& in, int64_t channel, int g,
                                         bool live) const {
    const float dD_sum = channel_sum<G>(dD), ddelta_bias_sum = channel_sum<G>(ddelta_bias);
    if (!live) return;
#pragma unroll
    for (int j = 0; j < S; ++j)
      if (g * S + j < in.state) atomicAdd(out.dA + channel * in.state + g * S + j, dA[j]);
    if (g == 0 && out.dD) atomicAdd(out.dD + channel, dD_sum);
    if (g == 0 && out.ddelta_bias) atomicAdd(out.ddelta_bias + channel, ddelta_bias_sum);
  }
};

// The states of one piece from its checkpoint (h, advanced in place) into tiles.states, and C . h
// per position into tiles.dy. Positions past the end were staged with dt = 0 and C = 0. Each
// quarter piece keeps its partial sums in registers, summed over the channel's G lanes by one
// reduce-scatter instead of a sum per position. kStoresAfterSpan: the quarter piece's states wait
// in registers too, since the compiled code keeps each shared-memory load after the stores that
// precede it (the compiler cannot tell the tiles apart), and a store per position would hold
// each position's loads behind the previous position's whole chain.
template <bool kStoresAfterSpan, int G, int S, typename Tiles>
__device__ __forceinline__ void recompute_piece(Tiles& tiles, const float (&A2)[S], float (&h)[S], int c, int g) {
#pragma unroll
  for (int span = 0; span < kPiece; span += kSpan) {
    float y_part[kSpan];
    if constexpr (kStoresAfterSpan) {
      float kept[kSpan][S];
      scan_positions(tiles.in, span, c, g, A2, h, y_part, [&](int t, const float(&state)[S]) {
#pragma unroll
        for (int j = 0; j < S; ++j) kept[t - span][j] = state[j];
      });
#pragma unroll
      for (int t = 0; t < kSpan; ++t) store_states(tiles.states[span + t], threadIdx.x, kept[t]);
    } else {
      scan_positions(tiles.in, span, c, g, A2, h, y_part,
                     [&](int t, const float(&state)[S]) { store_states(tiles.states[t], threadIdx.x, state); });
    }
    const int first = span + sum_over_channel_lanes<G>(y_part, g);
#pragma unroll
    for (int k = 0; k < kSpan / G; ++k) tiles.dy[c][first + k] = y_part[k];
  }
}

// dB and dC of position t (v: this lane's S of each), summed over the warp's channels into the
// warp's row of tiles.bc_grad.
template <int G, int S, typename Tiles>
__device__ __forceinline__ void store_state_gradients(Tiles& tiles, float (&v)[2 * S], int t, int g, int lane,
                                                      int warp) {
  int first;
  bool writer;
  reduce_over_channels<G>(v, lane, first, writer);
  if (!writer) return;
#pragma unroll
  for (int k = 0; k < kStateSums<G, S>; ++k)
    tiles.state_gradient(warp, t, state_gradient_slot<G, S>(first + k, g)) = v[k];
}

// A quarter piece's dB | dC sums over the warp's channels (sums, from reduce_over_channels: the
// lane's values first.. at each position span..) into the warp's rows of tiles.bc_grad.
template <int G, int S, typename Tiles>
__device__ __forceinline__ void store_span_state_gradients(Tiles& tiles, const float (&sums)[kSpan][kStateSums<G, S>],
                                                           int span, int first, bool writer, int g, int warp) {
  if (!writer) return;
#pragma unroll
  for (int t = 0; t < kSpan; ++t)
#pragma unroll
    for (int k = 0; k < kStateSums<G, S>; ++k)
      tiles.state_gradient(warp, span + t, state_gradient_slot<G, S>(first + k, g)) = sums[t][k];
}

// One position of the adjoint recurrence for this lane's S states (prev: h_{t-1}, current: h_t,
// moved back to h_{t-1}): advances a.adj, adds to a.dA, leaves dB | dC in v and returns this
// lane's parts of du and d(dt), still to be summed over the channel's lanes. Factored, they are
// sum_j g_j B_j and sum_j A_j g_j exp(dt A_j) h_{t-1,j}; finish_span forms du = dt (sum g B) and
// d(dt) = sum A g exp(dt A) h + u (sum g B), which the unfactored form sums per state.
template <bool kFactored, int S>
__device__ __forceinline__ float2 adjoint_position(AdjointLane<S>& a, const float (&Bt)[S], const float (&Ct)[S],
                                                   const float (&prev)[S], float (&current)[S], float dt, float dt_u,
                                                   float u, float dy, float (&v)[2 * S]) {
  float du = 0.f, ddt = 0.f;
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const float adjoint = a.decay_next[j] * a.adj[j] + dy * Ct[j];  // dL/dh_t
    const float decay = fast_exp2(dt * a.A2[j]);
    const float decayed = decay * prev[j];  // exp(dt A) h_{t-1}
    du += adjoint * Bt[j];
    if constexpr (kFactored) {
      const float weighted = adjoint * decayed;
      ddt += a.A[j] * weighted;
      a.dA[j] += dt * weighted;
    } else {
      ddt += adjoint * (a.A[j] * decayed + Bt[j] * u);
      a.dA[j] += adjoint * dt * decayed;
    }
    v[j] = adjoint * dt_u;       // dB
    v[S + j] = dy * current[j];  // dC
    a.adj[j] = adjoint;
    a.decay_next[j] = decay;
    current[j] = prev[j];
  }
  return kFactored ? make_float2(du, ddt) : make_float2(du * dt, ddt);
}

// After a quarter piece's parts are summed over the channel's lanes (this lane holds those of
// positions first .. first + kSpan / G - 1): du and d(delta) into the tiles, dD and d(delta_bias)
// into the lane's sums.
template <bool kFactored, int G, int S, typename Tiles>
__device__ __forceinline__ void finish_span(Tiles& tiles, AdjointLane<S>& a, const float (&du_part)[kSpan],
                                            const float (&ddt_part)[kSpan], int first, float D, int c) {
#pragma unroll
  for (int k = 0; k < kSpan / G; ++k) {
    const int t = first + k;
    const float dy = tiles.dy[c][t], u = tiles.in.u[c][t];
    const float du = kFactored ? du_part[k] * tiles.in.dt[c][t] : du_part[k];
    const float ddt = kFactored ? ddt_part[k] + u * du_part[k] : ddt_part[k];
    const float dd = ddt * tiles.in.slope[c][t];
    tiles.du[c][t] = du + dy * D;
    tiles.ddelta[c][t] = dd;
    a.dD += dy * u;
    a.ddelta_bias += dd;
  }
}

// The adjoint recurrence g_t = dy_t C_t + exp(dt_{t+1} A) g_{t+1} back through one piece, from
// the states in tiles.states (h0: the state before the piece). Positions past the end carry
// dy = 0 and dt = 0 and come first, while g is still zero, so they add nothing. du and d(dt) of
// each quarter piece are summed over the channel's G lanes by one reduce-scatter each.
// kStoresAfterSpan: the dB | dC sums of a quarter piece wait in registers (see recompute_piece).
template <bool kFactored, bool kStoresAfterSpan, int G, int S, typename Tiles>
__device__ __forceinline__ void adjoint_piece(Tiles& tiles, const float (&h0)[S], AdjointLane<S>& a, float D, int c,
                                              int g, int lane, int warp) {
  float current[S];  // h_t
  load_states(tiles.states[kPiece - 1], threadIdx.x, current);
#pragma unroll
  for (int span = kPiece - kSpan; span >= 0; span -= kSpan) {
    float du_part[kSpan], ddt_part[kSpan], sums[kSpan][kStateSums<G, S>];
    int first_sum = 0;
    bool writer = false;
#pragma unroll
    for (int t = span + kSpan - 1; t >= span; --t) {
      float Bt[S], Ct[S], prev[S];  // prev: h_{t-1}
      load_states(tiles.in.B[t], g, Bt);
      load_states(tiles.in.C[t], g, Ct);
      if (t > 0) {
        load_states(tiles.states[t - 1], threadIdx.x, prev);
      } else {
#pragma unroll
        for (int j = 0; j < S; ++j) prev[j] = h0[j];
      }
      float v[2 * S];
      const float2 parts = adjoint_position<kFactored>(a, Bt, Ct, prev, current, tiles.in.dt[c][t], tiles.in.dt_u[c][t],
                                                       tiles.in.u[c][t], tiles.dy[c][t], v);
      du_part[t - span] = parts.x;
      ddt_part[t - span] = parts.y;
      if constexpr (kStoresAfterSpan) {
        reduce_over_channels<G>(v, lane, first_sum, writer);
#pragma unroll
        for (int k = 0; k < kStateSums<G, S>; ++k) sums[t - span][k] = v[k];
      } else {
        store_state_gradients<G, S>(tiles, v, t, g, lane, warp);
      }
    }
    if constexpr (kStoresAfterSpan) store_span_state_gradients<G, S>(tiles, sums, span, first_sum, writer, g, warp);
    const int first = span + sum_over_channel_lanes<G>(du_part, g);
    sum_over_channel_lanes<G>(ddt_part, g);
    finish_span<kFactored, G>(tiles, a, du_part, ddt_part, first, D, c);
  }
}

// Where one piece sits: its sequence, first channel, first position and length.
struct PieceAt {
  int64_t b, c0, start;
  int len;
};

// Calls f(e) for this thread's elements e = threadIdx.x + i * kThreads below kCount: two at a
// time (kUnrolled: independent iterations issue together; the whole sequence unrolled took 196
// registers in the backward kernel, which leaves two blocks an SM) or as a loop over blockDim.x.
template <bool kUnrolled, int kThreads, int kCount, typename F>
__device__ __forceinline__ void for_each_element(F&& f) {
  if constexpr (kUnrolled) {
    static_assert(kCount % kThreads == 0, "whole rounds");
#pragma unroll 2
    for (int i = 0; i < kCount / kThreads; ++i) f(static_cast<int>(threadIdx.x) + i * kThreads);
  } else {
    for (int e = threadIdx.x; e < kCount; e += blockDim.x) f(e);
  }
}

// The gate out = y * silu(z) with y = C . h + D u (C . h in tiles.dy): writes dz and leaves the
// gradient of the ungated y in tiles.dy (zero past the end). kBatched: all of the thread's
// elements are read before any is stored (see recompute_piece).
template <bool kBatched, typename T, typename Tiles>
__device__ __forceinline__ void gate_gradients(const ScanOperands& in, const PieceAt& p, Tiles& tiles, T* dz_out) {
  constexpr int kCount = kChannels * kPiece, kThreads = Tiles::kThreads;
  auto gradient_of_y = [&](int e) {
    const int cc = e / kPiece, t = e % kPiece;
    const int64_t ch = p.c0 + cc;
    if (ch >= in.channels || t >= p.len) return 0.f;
    const float grad = tiles.in.grad[cc][t];
    if (!in.z) return grad;
    const int64_t at = (p.b * in.channels + ch) * in.length + p.start + t;
    const float y = tiles.dy[cc][t] + (in.D ? in.D[ch] : 0.f) * tiles.in.u[cc][t];
    const float zz = tiles.in.z[cc][t];
    const float sig = 1.f / (1.f + __expf(-zz));
    dz_out[at] = from_float<T>(grad * y * sig * (1.f + zz * (1.f - sig)));
    return grad * zz * sig;
  };
  if constexpr (kBatched) {
    float dy[kCount / kThreads];
#pragma unroll
    for (int i = 0; i < kCount / kThreads; ++i) dy[i] = gradient_of_y(threadIdx.x + i * kThreads);
#pragma unroll
    for (int i = 0; i < kCount / kThreads; ++i) {
      const int e = threadIdx.x + i * kThreads;
      tiles.dy[e / kPiece][e % kPiece] = dy[i];
    }
  } else {
    for_each_element<false, kThreads, kCount>([&](int e) { tiles.dy[e / kPiece][e % kPiece] = gradient_of_y(e); });
  }
}

// The piece's du and d(delta) out, and its dB and dC (summed over the block's warps) added to
// the sums over the channel tiles, one atomic add per (position, state).
template <bool kUnrolled, typename T, typename Tiles>
__device__ __forceinline__ void write_piece_gradients(const ScanOperands& in, const PieceAt& p, const Tiles& tiles,
                                                      const ScanGradients& out) {
  constexpr int NS = Tiles::NS, kThreads = Tiles::kThreads;
  const int64_t n = in.state, l = in.length;
  for_each_element<kUnrolled, kThreads, kChannels * kPiece>([&](int e) {
    const int cc = e / kPiece, t = e % kPiece;
    const int64_t ch = p.c0 + cc;
    if (ch >= in.channels || t >= p.len) return;
    const int64_t at = (p.b * in.channels + ch) * l + p.start + t;
    static_cast<T*>(out.du)[at] = from_float<T>(tiles.du[cc][t]);
    static_cast<T*>(out.ddelta)[at] = from_float<T>(tiles.ddelta[cc][t]);
  });
  for_each_element<kUnrolled, kThreads, 2 * NS * kPiece>([&](int e) {
    const int which = e / (NS * kPiece), s = (e / kPiece) % NS, t = e % kPiece;
    if (s >= n || t >= p.len) return;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < Tiles::kWarps; ++w) sum += tiles.state_gradient(w, t, which * NS + s);
    atomicAdd((which ? out.dC : out.dB) + (p.b * n + s) * l + p.start + t, sum);
  });
}

template <typename T, int G, int S, ScanBackwardVariant V>
__global__ void __launch_bounds__(kChannels* G)
    scan_backward_kernel(ScanOperands in, const float* __restrict__ checkpoints, const T* __restrict__ grad_y,
                         ScanGradients out) {
  using Traits = VariantTraits<V>;
  using Tiles = BackwardTiles<G, S, Traits::kStateRows>;
  constexpr int NS = Tiles::NS, kThreads = Tiles::kThreads;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  auto& tiles = *reinterpret_cast<Tiles*>(shared_bytes);
  const int64_t b = blockIdx.y, c0 = static_cast<int64_t>(blockIdx.x) * kChannels;
  const int c = threadIdx.x / G, g = threadIdx.x % G, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t channel = c0 + c;
  const bool live = channel < in.channels;
  const int64_t n = in.state, l = in.length, pieces = (l + kCheckpointInterval - 1) / kCheckpointInterval;
  const float D = live && in.D ? in.D[channel] : 0.f;

  AdjointLane<S> a(in, channel, g, live);

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
    const PieceAt at{b, c0, piece * kPiece, length_of(piece * kPiece)};
    next.store(in, c0, at.len, tiles.in);
    float h0[S], h[S];
#pragma unroll
    for (int j = 0; j < S; ++j) h0[j] = h[j] = next_h0[j];
    __syncthreads();
    if (piece > 0) load_piece(piece - 1);

    recompute_piece<Traits::kStoresAfterSpan, G, S>(tiles, a.A2, h, c, g);
    __syncthreads();

    gate_gradients<Traits::kStoresAfterSpan>(in, at, tiles, static_cast<T*>(out.dz));
    __syncthreads();

    adjoint_piece<Traits::kFactored, Traits::kStoresAfterSpan, G, S>(tiles, h0, a, D, c, g, lane, warp);
    __syncthreads();

    write_piece_gradients<Traits::kStoresAfterSpan, T>(in, at, tiles, out);
    __syncthreads();
  }

  a.template add_to<G>(out, in, channel, g, live);
}

// At four states a lane (n > 16) the registers that kStoresAfterSpan holds for a quarter piece
// spill: those sizes run kStateRowsFactored instead.
template <int S>
constexpr ScanBackwardVariant variant_for(ScanBackwardVariant v) {
  return v == ScanBackwardVariant::kStoresAfterSpan && S > 2 ? ScanBackwardVariant::kStateRowsFactored : v;
}

template <typename T, int G, int S, ScanBackwardVariant kAsked>
cudaError_t launch_backward(const ScanOperands& in, const float* checkpoints, const void* grad_y,
                            const ScanGradients& out, cudaStream_t stream) {
  constexpr ScanBackwardVariant V = variant_for<S>(kAsked);
  auto kernel = scan_backward_kernel<T, G, S, V>;
  const size_t shared = sizeof(BackwardTiles<G, S, VariantTraits<V>::kStateRows>);
  if (const cudaError_t status = triax::kernels::allow_dynamic_shared_memory(kernel, shared); status != cudaSuccess)
    return status;
  // All of the SM's unified memory as shared memory: three blocks of n = 16 take 220 KB (the
  // kernel spills nothing to local memory, so it needs little L1).
  if (const cudaError_t status =
          cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
      status != cudaSuccess)
    return status;
  const dim3 grid(static_cast<unsigned>((in.channels + kChannels - 1) / kChannels), static_cast<unsigned>(in.batch));
  kernel<<<grid, kChannels * G, shared, stream>>>(in, checkpoints, static_cast<const T*>(grad_y), out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t selective_scan_backward(const ScanOperands& in, const float* checkpoints, const void* grad_y,
                                    const ScanGradients& out, cudaStream_t stream, ScanBackwardVariant variant) {
  if (in.batch == 0 || in.channels == 0 || in.length == 0) return cudaSuccess;
  return dispatch_scan_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch_layout(in.state, [&](auto lanes, auto states) {
      constexpr int G = decltype(lanes)::value, S = decltype(states)::value;
      switch (variant) {
        case ScanBackwardVariant::kPositionRows:
          return launch_backward<T, G, S, ScanBackwardVariant::kPositionRows>(in, checkpoints, grad_y, out, stream);
        case ScanBackwardVariant::kStateRows:
          return launch_backward<T, G, S, ScanBackwardVariant::kStateRows>(in, checkpoints, grad_y, out, stream);
        case ScanBackwardVariant::kStateRowsFactored:
          return launch_backward<T, G, S, ScanBackwardVariant::kStateRowsFactored>(in, checkpoints, grad_y, out,
                                                                                   stream);
        case ScanBackwardVariant::kStoresAfterSpan:
          return launch_backward<T, G, S, ScanBackwardVariant::kStoresAfterSpan>(in, checkpoints, grad_y, out, stream);
      }
      return cudaErrorInvalidValue;
    });
  });
}

}  // namespace triax::mamba::kernels
