#include "triax/layers/key_value_cache.hpp"

#include <ATen/ATen.h>

#include "triax/error.hpp"
#include "triax/layers/attention_mask.hpp"
#include "triax/tensor_text.hpp"

namespace triax {

at::Tensor KeyValueCache::attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t start,
                                 int64_t keep, double scale, std::optional<int64_t> window) {
  if (k.dim() != 4 || q.dim() != 4 || k.size(0) != 1 || v.sizes() != k.sizes() || q.size(2) != k.size(2))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "KeyValueCache: q " + shape_text(q.sizes()) + ", k " + shape_text(k.sizes()) + " and v " +
                                                  shape_text(v.sizes()) + " are not one row's [1, heads, new, head_dim]");
  const int64_t fresh = k.size(2);
  if (start < 0 || keep > fresh || start + keep > capacity_)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "KeyValueCache: storing " + std::to_string(keep) + " tokens after " +
                                                  std::to_string(start) + " exceeds its capacity of " +
                                                  std::to_string(capacity_));
  if (!keys_.defined()) {
    keys_ = at::empty({1, k.size(1), capacity_, k.size(3)}, k.options());
    values_ = at::empty({1, v.size(1), capacity_, v.size(3)}, v.options());
  }
  const at::Tensor keys = at::cat({keys_.narrow(2, 0, start), k}, 2);
  const at::Tensor values = at::cat({values_.narrow(2, 0, start), v}, 2);
  keys_.narrow(2, start, keep).copy_(k.narrow(2, 0, keep));
  values_.narrow(2, start, keep).copy_(v.narrow(2, 0, keep));
  // New token j (position start + j) sees every key up to its own position (within the window).
  const auto positions = at::TensorOptions().dtype(at::kLong).device(k.device());
  const at::Tensor visible =
      causal_visibility(at::arange(fresh, positions) + start, at::arange(start + fresh, positions), window);
  return at::scaled_dot_product_attention(q, keys, values, visible, /*dropout_p=*/0.0, /*is_causal=*/false, scale,
                                          /*enable_gqa=*/true);
}

}  // namespace triax
