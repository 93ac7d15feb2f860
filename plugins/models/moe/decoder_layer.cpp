#include "decoder_layer.hpp"

#include "triax/layers/key_value_cache.hpp"

namespace triax::moe {

MoeDecoderLayer::MoeDecoderLayer(const MoeConfig& c, int64_t layer, const ModelContext& context) {
  self_attn = register_module(
      "self_attn", std::make_shared<GroupedQueryAttention>(
                       AttentionShape{c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.attention_bias},
                       context));
  if (c.is_moe_layer(layer))
    moe_mlp = register_module("mlp", std::make_shared<MoeBlock>(c, context));
  else
    dense_mlp = register_module("mlp", std::make_shared<SwiGluMlp>(c.hidden_size, c.intermediate_size, context));
  auto norm = [&] {
    return std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps, context.device, context.dtype,
                                     TensorParallel::of(context));
  };
  input_layernorm = register_module("input_layernorm", norm());
  post_attention_layernorm = register_module("post_attention_layernorm", norm());
}

at::Tensor MoeDecoderLayer::forward(const at::Tensor& x, const std::vector<at::Tensor>& rotary) {
  return forward_stream({x, at::Tensor()}, rotary).materialized();
}

ResidualStream MoeDecoderLayer::forward_stream(const ResidualStream& stream, const std::vector<at::Tensor>& rotary) {
  const auto [x, normed] = input_layernorm->forward_of_stream(stream);
  return with_attention(x, self_attn->forward(normed, rotary.at(0), rotary.at(1)));
}

std::unique_ptr<LayerCache> MoeDecoderLayer::create_cache(int64_t capacity) {
  return std::make_unique<KeyValueCache>(capacity);
}

at::Tensor MoeDecoderLayer::forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& rotary,
                                           const CachedStep& step) {
  return with_attention(x, self_attn->forward_cached(input_layernorm->forward(x), rotary.at(0), rotary.at(1), step))
      .materialized();
}

ResidualStream MoeDecoderLayer::with_attention(const at::Tensor& x, const at::Tensor& attended) {
  const auto [h, normed] = post_attention_layernorm->forward_after_add(x, attended);  // h = x + attended
  // The next layer's norm adds them.
  return {h, moe_mlp ? moe_mlp->forward(normed) : dense_mlp->forward(normed)};
}

}  // namespace triax::moe
