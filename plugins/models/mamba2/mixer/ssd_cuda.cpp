#include "ssd_cuda.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernel_switch.hpp"
#include "ssd_kernels.hpp"
#include "triax/kernels/cuda_launch.hpp"

namespace triax::mamba2::ssd {
namespace {

namespace launch = triax::cuda_launch;

// The backward keeps r x 256 fp32 column sums a block in shared memory (up to 227 KiB).
constexpr int64_t kMaxHeadsPerGroup = 200;

kernels::ChunkShape shape_of(const Chunks& k) { return {k.b * k.c * k.g, k.r, k.q}; }

}  // namespace

bool ssd_kernels_apply(const Chunks& k) {
  static const bool switched_on = kernel_switched_on("TRIAX_MAMBA2_SSD_KERNELS");
  return switched_on && fused_kernels_enabled() && k.dt.is_cuda() && k.type == at::kFloat &&
         launch::kernel_dtype(k.operand).has_value() && k.r <= kMaxHeadsPerGroup;
}

at::Tensor masked_scores_cuda(const Chunks& k, const at::Tensor& scores) {
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor decay = k.decay.contiguous(), s = scores.contiguous();
  at::Tensor out = at::empty({k.b, k.c, k.g, k.r, k.q, k.q}, k.dt.options().dtype(k.operand));
  launch::check(kernels::masked_scores(*launch::kernel_dtype(k.operand), decay.const_data_ptr<float>(),
                                       s.const_data_ptr<float>(), out.data_ptr(), shape_of(k), launch::stream_of(s)),
                "masked_scores");
  return out;
}

MaskedScoresGradients masked_scores_backward_cuda(const Chunks& k, const at::Tensor& d_masked,
                                                  const at::Tensor& scores) {
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor decay = k.decay.contiguous(), s = scores.contiguous(), dm = d_masked.contiguous();
  const int64_t tiles = (k.q + kernels::kScoreTile - 1) / kernels::kScoreTile;
  const at::TensorOptions f32 = k.dt.options().dtype(at::kFloat);
  at::Tensor dscores = at::empty({k.b, k.c, k.g, k.q, k.q}, f32.dtype(k.operand));
  at::Tensor rows = at::zeros({k.b, k.c, k.g, k.r, k.q, tiles}, f32);
  at::Tensor columns = at::empty({k.b, k.c, k.g, k.r, k.q}, f32);
  launch::check(kernels::masked_scores_backward(*launch::kernel_dtype(k.operand), dm.const_data_ptr<float>(),
                                                decay.const_data_ptr<float>(), s.const_data_ptr<float>(),
                                                dscores.data_ptr(), rows.data_ptr<float>(), columns.data_ptr<float>(),
                                                shape_of(k), launch::stream_of(s)),
                "masked_scores_backward");
  return {dscores, rows.sum(-1) - columns};
}

}  // namespace triax::mamba2::ssd
