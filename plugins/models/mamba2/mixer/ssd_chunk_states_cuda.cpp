#include "ssd_chunk_states_cuda.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <string>

#include "ssd_chunk_states_kernels.hpp"
#include "ssd_cuda.hpp"
#include "triax/environment_switch.hpp"
#include "triax/kernels/cuda_launch.hpp"

namespace triax::mamba2::ssd {
namespace {

namespace launch = triax::cuda_launch;
using launch::contiguous_aligned;

kernels::ChunkScanShape states_shape_of(const Chunks& k) { return {k.b, k.c, k.g, k.r, k.p, k.n, k.q, k.l}; }

void expect_states_kernel_applies(const Chunks& k, const char* what) {
  if (!chunk_states_kernel_applies(k))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(what) +
                                                  ": shape, dtype or device the chunk states' kernels "
                                                  "do not take (check chunk_states_kernel_applies first)");
}

}  // namespace

bool chunk_states_kernel_switched_on() { return switched_on_when_one("TRIAX_MAMBA2_CHUNK_STATES_KERNEL"); }

bool chunk_states_kernel_applies(const Chunks& k) {
  return chunk_states_kernel_switched_on() && ssd_kernels_apply(k) &&
         (k.operand == at::kBFloat16 || k.operand == at::kHalf) && kernels::chunk_states_supports(states_shape_of(k));
}

at::Tensor chunk_states_cuda(const Chunks& k, const at::Tensor& to_end) {
  expect_states_kernel_applies(k, "chunk_states_cuda");
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor xdt = contiguous_aligned(k.xdt), B = contiguous_aligned(k.B);
  const at::Tensor w = contiguous_aligned(to_end.to(at::kFloat));
  at::Tensor states = at::empty({k.b, k.c, k.g, k.r * k.p, k.n}, w.options());
  launch::check(kernels::chunk_states_mma(*launch::kernel_dtype(k.operand), xdt.const_data_ptr(),
                                          w.const_data_ptr<float>(), B.const_data_ptr(), states.data_ptr<float>(),
                                          states_shape_of(k), launch::stream_of(xdt)),
                "chunk_states_mma");
  return states;
}

ChunkStatesGradients chunk_states_backward_cuda(const Chunks& k, const at::Tensor& to_end, const at::Tensor& d_states,
                                                at::Tensor& d_xdt) {
  expect_states_kernel_applies(k, "chunk_states_backward_cuda");
  if (d_xdt.scalar_type() != at::kFloat || d_xdt.sizes() != at::IntArrayRef{k.b, k.c, k.g, k.q, k.r, k.p})
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "chunk_states_backward_cuda: d_xdt must be fp32 [b, c, g, q, r, p] (updated in place)");
  if (!d_xdt.is_contiguous()) d_xdt = d_xdt.contiguous();
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor xdt = contiguous_aligned(k.xdt), B = contiguous_aligned(k.B);
  const at::Tensor w = contiguous_aligned(to_end.to(at::kFloat));
  const at::Tensor ds = contiguous_aligned(d_states.to(k.operand));  // no copy where the state passing stored it so
  at::Tensor d_B = at::empty({k.b, k.c, k.g, k.q, k.n}, w.options());
  at::Tensor d_to_end = at::empty({k.b, k.c, k.g, k.r, k.q}, w.options());
  const triax::kernels::Dtype operand = *launch::kernel_dtype(k.operand);
  const cudaStream_t stream = launch::stream_of(xdt);
  launch::check(
      kernels::chunk_states_backward_B(operand, xdt.const_data_ptr(), w.const_data_ptr<float>(), ds.const_data_ptr(),
                                       d_B.data_ptr<float>(), states_shape_of(k), stream),
      "chunk_states_backward_B");
  launch::check(kernels::chunk_states_backward_xdt(
                    operand, B.const_data_ptr(), ds.const_data_ptr(), xdt.const_data_ptr(), w.const_data_ptr<float>(),
                    d_xdt.data_ptr<float>(), d_to_end.data_ptr<float>(), states_shape_of(k), stream),
                "chunk_states_backward_xdt");
  return {d_B, d_to_end};
}

}  // namespace triax::mamba2::ssd
