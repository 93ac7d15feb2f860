#include "triax/layers/decode_gemv.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <vector>

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "triax/environment_switch.hpp"
#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {

#ifdef TRIAX_WITH_CUDA
namespace {

bool switched_on() {
  static const bool on = switched_on_unless_zero("TRIAX_DECODE_GEMV");
  return on;
}

bool gradient_wanted(const at::Tensor& x, const at::Tensor& matrix) {
  return at::GradMode::is_enabled() && (x.requires_grad() || matrix.requires_grad());
}

}  // namespace

at::Tensor decode_gemv(const at::Tensor& x, const at::Tensor& matrix) {
  if (!switched_on() || x.dim() < 1 || matrix.dim() != 2 || x.size(-1) != matrix.size(1)) return {};
  if (gradient_wanted(x, matrix) || !x.is_contiguous() || !matrix.is_contiguous()) return {};
  if (!cuda_launch::kernels_apply({&x, &matrix})) return {};
  const int64_t in = matrix.size(1), out = matrix.size(0), rows = in == 0 ? 0 : x.numel() / in;
  if (!kernels::gemv_applies(rows, in, static_cast<int>(x.element_size()), x.const_data_ptr(), matrix.const_data_ptr(),
                             x.const_data_ptr()))
    return {};
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  at::Tensor y = at::empty(shape, x.options());  // the allocator's blocks are 512-byte aligned
  c10::cuda::CUDAGuard device(x.device());
  cuda_launch::check(kernels::gemv(*cuda_launch::kernel_dtype(x.scalar_type()), x.const_data_ptr(),
                                   matrix.const_data_ptr(), y.mutable_data_ptr(), rows, out, in,
                                   cuda_launch::stream_of(x)),
                     "decode_gemv");
  return y;
}
#else
at::Tensor decode_gemv(const at::Tensor&, const at::Tensor&) { return {}; }
#endif

}  // namespace triax
