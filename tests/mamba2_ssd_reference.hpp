// The plain sequential form of Mamba-2's SSD scan, for tests only: one step per position,
//   S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T,  y_t = S_t C_t  (per head, B and C of its group),
// with the inputs' shapes of triax::mamba2::ssd_chunked (ssd.hpp). Differentiable by autograd.
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace mamba2_test {

// {y [b, l, H, P], final state [b, H, P, N]} in x's dtype.
inline std::pair<at::Tensor, at::Tensor> sequential_ssd(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A,
                                                        const at::Tensor& B, const at::Tensor& C,
                                                        const at::Tensor& initial_state = at::Tensor()) {
  const int64_t b = x.size(0), l = x.size(1), heads = x.size(2), p = x.size(3), n = B.size(3);
  const int64_t per_group = heads / B.size(2);
  const at::Tensor B_heads = B.repeat_interleave(per_group, 2), C_heads = C.repeat_interleave(per_group, 2);
  at::Tensor state = initial_state.defined() ? initial_state : at::zeros({b, heads, p, n}, x.options());
  std::vector<at::Tensor> ys;
  for (int64_t t = 0; t < l; ++t) {
    const at::Tensor step = dt.select(1, t);                                     // [b, H]
    const at::Tensor decay = at::exp(step * A).unsqueeze(-1).unsqueeze(-1);      // [b, H, 1, 1]
    const at::Tensor input = (x.select(1, t) * step.unsqueeze(-1)).unsqueeze(-1) * B_heads.select(1, t).unsqueeze(2);
    state = decay * state + input;                                               // [b, H, P, N]
    ys.push_back(at::matmul(state, C_heads.select(1, t).unsqueeze(-1)).squeeze(-1));  // [b, H, P]
  }
  return {at::stack(ys, 1), state};
}

}  // namespace mamba2_test
