#include "token_major_conv.hpp"

#include <ATen/ATen.h>

#include "selective_scan.hpp"

#ifdef TRIAX_MAMBA2_KERNELS
#include "token_major_conv_cuda.hpp"
#endif

namespace triax::mamba2 {

at::Tensor channel_major(const at::Tensor& token_major) {
  const int64_t b = token_major.size(0), s = token_major.size(1);
  return token_major.permute({0, 2, 3, 1}).contiguous().view({b, -1, s});
}

at::Tensor token_major_causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                     const c10::intrusive_ptr<InProjGradient>& x_gradient) {
#ifdef TRIAX_MAMBA2_KERNELS
  if (token_major_conv_applies(x, weight, bias)) return token_major_conv_cuda(x, weight, bias, x_gradient);
#else
  (void)x_gradient;
#endif
  return mamba::causal_conv1d(channel_major(x), weight, bias, /*silu=*/true).transpose(1, 2);
}

}  // namespace triax::mamba2
