// What the chunk states' kernels (ssd_chunk_states.cu, ssd_chunk_states_backward.cu) share: their
// tiles, shared-memory layouts (padded rows: 16 bytes apart mod 128, no ldmatrix bank conflicts),
// the dispatch over the operand type and the dims they are compiled for, and the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ssd_chunk_scan.cuh"
#include "ssd_chunk_states_kernels.hpp"

namespace triax::mamba2::kernels::chunk_states_tiles {

using scan_tiles::copy_rows_async;
using scan_tiles::kPad16;
using scan_tiles::round_up_128;
using scan_tiles::wait_async_copies;

constexpr int kPositions = 64;  // a tile's positions: the forward's k step, the backward's rows
constexpr int kChannels = 64;   // a forward block's channels of its head

// The forward: two stages (double buffered, stage k at k * stage bytes) of an xdt tile
// [kPositions][kChannels] and a B tile [kPositions][n], then the head's weights [q].
struct ForwardLayout {
  int ld_x, ld_b;
  size_t x, b, stage, weights, total;
};

__host__ __device__ inline ForwardLayout forward_layout(int64_t n, int64_t q) {
  ForwardLayout s;
  s.ld_x = kChannels + kPad16;
  s.ld_b = static_cast<int>(n) + kPad16;
  size_t at = 0;
  s.x = at, at += round_up_128(2 * static_cast<size_t>(kPositions) * s.ld_x);
  s.b = at, at += round_up_128(2 * static_cast<size_t>(kPositions) * s.ld_b);
  s.stage = at;
  s.weights = 2 * at;
  s.total = s.weights + round_up_128(4 * static_cast<size_t>(q));
  return s;
}

// The backward's xdt terms: B's rows of the tile [kPositions][n] and the head's d_states [p][n].
struct XdtLayout {
  int ld;
  size_t b, d_states, total;
};

__host__ __device__ inline XdtLayout xdt_layout(int64_t n, int64_t p) {
  XdtLayout s;
  s.ld = static_cast<int>(n) + kPad16;
  s.b = 0;
  s.d_states = round_up_128(2 * static_cast<size_t>(kPositions) * s.ld);
  s.total = s.d_states + round_up_128(2 * static_cast<size_t>(p) * s.ld);
  return s;
}

// The backward's B term: two stages (one head each) of an xdt tile [kPositions][p], the head's
// d_states [p][n] and the tile's weights [kPositions].
struct BLayout {
  int ld_x, ld_d;
  size_t x, d_states, weights, stage, total;
};

__host__ __device__ inline BLayout b_layout(int64_t n, int64_t p) {
  BLayout s;
  s.ld_x = static_cast<int>(p) + kPad16;
  s.ld_d = static_cast<int>(n) + kPad16;
  size_t at = 0;
  s.x = at, at += round_up_128(2 * static_cast<size_t>(kPositions) * s.ld_x);
  s.d_states = at, at += round_up_128(2 * static_cast<size_t>(p) * s.ld_d);
  s.weights = at, at += round_up_128(4 * static_cast<size_t>(kPositions));
  s.stage = at;
  s.total = 2 * at;
  return s;
}

// f(TypeTag<T>{}, std::integral_constant<int, v>{}) for the operand type and `value`, one of 64
// and 128 (the kernels' compiled p or n).
template <typename F>
cudaError_t dispatch_operand_and_size(triax::kernels::Dtype operand, int64_t value, F&& f) {
  auto for_type = [&](auto tag) -> cudaError_t {
    if (value == 64) return f(tag, std::integral_constant<int, 64>{});
    if (value == 128) return f(tag, std::integral_constant<int, 128>{});
    return cudaErrorInvalidValue;
  };
  if (operand == triax::kernels::Dtype::BFloat16) return for_type(triax::kernels::TypeTag<__nv_bfloat16>{});
  if (operand == triax::kernels::Dtype::Float16) return for_type(triax::kernels::TypeTag<__half>{});
  return cudaErrorInvalidValue;
}

// kernel<<<blocks, threads, shared, stream>>>(args...) with the shared memory allowed first.
template <typename Kernel, typename... Args>
cudaError_t launch(Kernel kernel, int64_t blocks, int threads, size_t shared, cudaStream_t stream, Args... args) {
  const cudaError_t allowed = triax::kernels::allow_dynamic_shared_memory(kernel, shared);
  if (allowed != cudaSuccess) return allowed;
  kernel<<<static_cast<unsigned>(blocks), threads, shared, stream>>>(args...);
  return cudaGetLastError();
}

}  // namespace triax::mamba2::kernels::chunk_states_tiles
