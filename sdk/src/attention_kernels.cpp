// Attention with its log-sum-exp (triax/layers/attention_kernels.hpp).
#include "triax/layers/attention_kernels.hpp"

#include <ATen/ATen.h>

#include <limits>
#include <string>

#include "triax/error.hpp"

namespace triax {
namespace {

constexpr double kDropout = 0.0;
// The memory-efficient kernel keeps its log-sum-exp rows padded to a multiple of this, and wants
// its bias's rows aligned to 16 elements (as scaled_dot_product_attention pads them).
constexpr int64_t kLseAlignment = 32;
constexpr int64_t kBiasAlignment = 16;

// A boolean mask as the additive bias the kernels take: 0 where visible, -inf elsewhere.
at::Tensor additive_bias(const at::Tensor& visible, const at::Tensor& q) {
  return at::zeros(visible.sizes(), q.options())
      .masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity());
}

// The CUDA kernel's bias: [batch, heads, queries, keys], its rows' storage padded to 16 elements.
at::Tensor efficient_bias(const at::Tensor& visible, const at::Tensor& q, int64_t keys) {
  if (!visible.defined()) return at::Tensor();
  const int64_t padded = (keys + kBiasAlignment - 1) / kBiasAlignment * kBiasAlignment;
  const at::Tensor bias = additive_bias(visible, q).expand({q.size(0), q.size(1), q.size(2), keys});
  return at::constant_pad_nd(bias, {0, padded - keys}, 0.0).narrow(-1, 0, keys);
}

// Where a query sees no key the kernels leave out 0 and lse 0 (CPU) or undefined values: the
// merge needs lse -inf and out 0 there.
void mark_unseen_rows(AttentionWithLse& result, const at::Tensor& visible) {
  if (!visible.defined()) return;
  const at::Tensor unseen = visible.any(-1).logical_not();  // [batch or 1, 1, queries]
  result.lse.masked_fill_(unseen, -std::numeric_limits<double>::infinity());
  result.out.masked_fill_(unseen.unsqueeze(-1), 0.0);
}

void require_supported(const at::Tensor& q) {
  if (!q.device().is_cpu() && !q.device().is_cuda())
    throw Error(TRIAX_ERROR_UNSUPPORTED, "ring attention: no attention kernel with log-sum-exp for device " +
                                             q.device().str() + " (CPU and CUDA have one)");
}

}  // namespace

AttentionWithLse attention_with_lse(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& visible, bool causal, double scale) {
  require_supported(q);
  AttentionWithLse result;
  if (q.device().is_cpu()) {
    const std::optional<at::Tensor> bias =
        visible.defined() ? std::optional<at::Tensor>(additive_bias(visible, q)) : std::nullopt;
    std::tie(result.out, result.lse) =
        at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, kDropout, causal, bias, scale);
  } else {
    const at::Tensor bias = efficient_bias(visible, q, k.size(2));
    const auto outputs = at::_scaled_dot_product_efficient_attention(
        q, k, v, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
        /*compute_log_sumexp=*/true, kDropout, causal, scale);
    result.out = std::get<0>(outputs);
    result.lse = std::get<1>(outputs).narrow(2, 0, q.size(2));
  }
  mark_unseen_rows(result, visible);
  return result;
}

std::array<at::Tensor, 3> attention_with_lse_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                      const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                                                      const at::Tensor& lse, const at::Tensor& visible, bool causal,
                                                      double scale) {
  require_supported(q);
  if (q.device().is_cpu()) {
    const std::optional<at::Tensor> bias =
        visible.defined() ? std::optional<at::Tensor>(additive_bias(visible, q)) : std::nullopt;
    const auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, q, k, v, out, lse,
                                                                                       kDropout, causal, bias, scale);
    return {dq, dk, dv};
  }
  const int64_t queries = q.size(2);
  const int64_t padded = (queries + kLseAlignment - 1) / kLseAlignment * kLseAlignment;
  const at::Tensor padded_lse = at::constant_pad_nd(lse, {0, padded - queries}, 0.0).contiguous();
  // Without dropout the kernel reads no random state: the seed and offset are placeholders.
  const at::Tensor no_random = at::zeros({}, q.options().dtype(at::kLong));
  const auto grads = at::_scaled_dot_product_efficient_attention_backward(
      grad_out, q, k, v, efficient_bias(visible, q, k.size(2)), out, padded_lse, no_random, no_random, kDropout,
      {true, true, true, false}, causal, scale);
  return {std::get<0>(grads), std::get<1>(grads), std::get<2>(grads)};
}

}  // namespace triax
