// The SSD's state passing across chunks (ssd_kernels.hpp): a sequential loop over the chunks
// per state value, in place of the passing-matrix product and the copies that lay its operands
// out. The backward's decay sums are block reductions in a fixed order: the same bits every run.
// Either may also store what the next products read in their operand type (bf16, fp16): the
// forward a rounded copy of the entering states, the backward the chunk states' gradient.
#include "ssd_kernels.hpp"
#include "triax/kernels/kernel_utils.cuh"

namespace triax::mamba2::kernels {
namespace {

constexpr int kThreads = 256;
static_assert(kPassingSlice == kThreads, "one value a thread");

// Operand: the type of entering_operand (null: not written).
template <typename Operand>
__global__ void pass_states_kernel(const float* __restrict__ states, const float* __restrict__ chunk_decay,
                                   const float* __restrict__ initial, float* __restrict__ entering,
                                   float* __restrict__ final_state, Operand* __restrict__ entering_operand,
                                   PassingShape s) {
  const int64_t total = s.batch * s.heads * s.values;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t value = i % s.values, head = (i / s.values) % s.heads, row = i / (s.values * s.heads);
    float state = initial ? initial[i] : 0.f;
    for (int64_t u = 0; u < s.chunks; ++u) {
      const int64_t at = ((row * s.chunks + u) * s.heads + head) * s.values + value;
      entering[at] = state;
      if (entering_operand) entering_operand[at] = triax::kernels::from_float<Operand>(state);
      state = expf(chunk_decay[(row * s.chunks + u) * s.heads + head]) * state + states[at];
    }
    final_state[i] = state;
  }
}

// One block per (row, head, slice of kThreads values); d_states in DStates.
template <typename DStates>
__global__ void pass_states_backward_kernel(const float* __restrict__ entering, const float* __restrict__ chunk_decay,
                                            const float* __restrict__ d_entering, const float* __restrict__ d_final,
                                            DStates* __restrict__ d_states, float* __restrict__ d_initial,
                                            float* __restrict__ partials, PassingShape s) {
  __shared__ float scratch[33];
  const int64_t slices = (s.values + kThreads - 1) / kThreads;
  const int64_t slice = blockIdx.x % slices, head = (blockIdx.x / slices) % s.heads;
  const int64_t row = blockIdx.x / (slices * s.heads), value = slice * kThreads + threadIdx.x;
  const bool inside = value < s.values;
  const int64_t own = (row * s.heads + head) * s.values + value;
  float d_boundary = inside && d_final ? d_final[own] : 0.f;  // of the state after chunk u
  for (int64_t u = s.chunks - 1; u >= 0; --u) {
    const int64_t at = ((row * s.chunks + u) * s.heads + head) * s.values + value;
    const float factor = expf(chunk_decay[(row * s.chunks + u) * s.heads + head]);
    float term = 0.f;
    if (inside) {
      d_states[at] = triax::kernels::from_float<DStates>(d_boundary);
      term = d_boundary * factor * entering[at];
    }
    const float sum = triax::kernels::block_reduce(term, scratch, triax::kernels::SumOp{}, 0.f);
    if (threadIdx.x == 0) partials[((row * s.chunks + u) * s.heads + head) * slices + slice] = sum;
    d_boundary = (inside ? d_entering[at] : 0.f) + factor * d_boundary;
  }
  if (inside) d_initial[own] = d_boundary;
}

}  // namespace

cudaError_t pass_states(const float* states, const float* chunk_decay, const float* initial, float* entering,
                        float* final_state, triax::kernels::Dtype operand, void* entering_operand,
                        const PassingShape& shape, cudaStream_t stream) {
  const int64_t total = shape.batch * shape.heads * shape.values;
  if (total == 0) return cudaSuccess;
  const unsigned grid = triax::kernels::grid_for(total, kThreads, int64_t{1} << 20);
  return triax::kernels::dispatch_dtype(operand, [&](auto tag) {
    using Operand = typename decltype(tag)::type;
    pass_states_kernel<Operand><<<grid, kThreads, 0, stream>>>(states, chunk_decay, initial, entering, final_state,
                                                               static_cast<Operand*>(entering_operand), shape);
    return cudaGetLastError();
  });
}

cudaError_t pass_states_backward(const float* entering, const float* chunk_decay, const float* d_entering,
                                 const float* d_final, triax::kernels::Dtype d_states_type, void* d_states,
                                 float* d_initial, float* chunk_decay_partials, const PassingShape& shape,
                                 cudaStream_t stream) {
  const int64_t slices = (shape.values + kThreads - 1) / kThreads;
  const int64_t blocks = shape.batch * shape.heads * slices;
  if (blocks == 0) return cudaSuccess;
  return triax::kernels::dispatch_dtype(d_states_type, [&](auto tag) {
    using DStates = typename decltype(tag)::type;
    pass_states_backward_kernel<DStates><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        entering, chunk_decay, d_entering, d_final, static_cast<DStates*>(d_states), d_initial, chunk_decay_partials,
        shape);
    return cudaGetLastError();
  });
}

}  // namespace triax::mamba2::kernels
