#include "triax/layers/multi_head_attention.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "triax/error.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/layers/key_value_cache.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"

namespace triax {

MultiHeadAttention::MultiHeadAttention(int64_t hidden_size, int64_t heads, const ModelContext& context)
    : tp_(TensorParallel::of(context)),
      local_heads_(tp_.shard_size(heads, "attention heads")),
      head_dim_(hidden_size / heads),
      scale_(1.0 / std::sqrt(static_cast<double>(head_dim_))) {
  if (ContextParallel::of(context.host).active())
    throw Error(TRIAX_ERROR_INVALID_CONFIG,
                "parallelism.context_parallel_size: multi-head attention with learned positions (GPT-2's) does not "
                "run over a cp group; set parallelism.context_parallel_size to 1");
  const LinearOptions linear = LinearOptions::of(hidden_size, hidden_size, context, /*bias=*/true);
  // c_attn's product runs in project(), outside the layer's forward: it stays out of fp8.
  LinearOptions fused_qkv = linear.conv1d(3);
  fused_qkv.keeps_model_dtype = true;
  c_attn = register_module("c_attn", std::make_shared<ColumnParallelLinear>(fused_qkv, tp_));
  c_proj = register_module("c_proj", std::make_shared<RowParallelLinear>(linear.conv1d(), tp_));
}

std::array<at::Tensor, 3> MultiHeadAttention::project(const at::Tensor& x) {
  // c_attn's forward, but with the key bias as a constant: it adds the same q.b_k to every score
  // of a query, which the softmax ignores, so its gradient is zero. Computed, it would be rounding
  // noise that Adam turns into steps of the learning rate, different at every topology.
  const at::Tensor& b = c_attn->bias;  // [3, heads/tp x head_dim]: q, k, v
  const at::Tensor bias = at::stack({b[0], b[1].detach(), b[2]}).reshape({-1});
  const at::Tensor& w = c_attn->weight;  // [hidden, 3, heads/tp x head_dim], Conv1D layout
  // [batch, seq, 3 x heads/tp x head_dim], q then k then v; seq is the whole sequence in either mode.
  const at::Tensor qkv = column_parallel_linear(x, w.reshape({w.size(0), -1}).t(), bias, tp_);
  const std::vector<at::Tensor> parts = qkv.view({x.size(0), qkv.size(1), 3, local_heads_, head_dim_}).unbind(2);
  return {parts[0].transpose(1, 2), parts[1].transpose(1, 2), parts[2].transpose(1, 2)};
}

at::Tensor MultiHeadAttention::output(const at::Tensor& attended) {
  return c_proj->forward(attended.transpose(1, 2).reshape({attended.size(0), -1, local_heads_ * head_dim_}));
}

at::Tensor MultiHeadAttention::forward(const at::Tensor& x) {
  const auto [q, k, v] = project(x);
  return output(at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true,
                                                 scale_));
}

at::Tensor MultiHeadAttention::forward_cached(const at::Tensor& x, const CachedStep& step) {
  const auto [q, k, v] = project(x);
  return output(KeyValueCache::attend(step, q, k, v, scale_));
}

}  // namespace triax
