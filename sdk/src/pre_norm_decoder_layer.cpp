#include "triax/layers/pre_norm_decoder_layer.hpp"

#include <utility>

#include "triax/layers/decode_norm_gemv.hpp"
#include "triax/layers/key_value_cache.hpp"
#include "triax/layers/swiglu_mlp.hpp"

namespace triax {

PreNormDecoderLayer::PreNormDecoderLayer(const AttentionShape& attention, double rms_norm_eps, UnaryModule mlp_block,
                                         const ModelContext& context)
    : mlp(std::move(mlp_block)) {
  // Registration order gives the Hugging Face parameter order.
  self_attn = register_module("self_attn", std::make_shared<GroupedQueryAttention>(attention, context));
  register_module("mlp", mlp.module);
  auto norm = [&] {
    return std::make_shared<RMSNorm>(attention.hidden_size, rms_norm_eps, context.device, context.dtype,
                                     TensorParallel::of(context));
  };
  input_layernorm = register_module("input_layernorm", norm());
  post_attention_layernorm = register_module("post_attention_layernorm", norm());
}

at::Tensor PreNormDecoderLayer::forward(const at::Tensor& x, const std::vector<at::Tensor>& rotary) {
  return forward_stream({x, at::Tensor()}, rotary).materialized();
}

ResidualStream PreNormDecoderLayer::forward_stream(const ResidualStream& stream,
                                                   const std::vector<at::Tensor>& rotary) {
  const auto [x, normed] = input_layernorm->forward_of_stream(stream);
  return with_attention(x, self_attn->forward(normed, rotary.at(0), rotary.at(1), MaskedAttention::from(rotary, 2)));
}

std::unique_ptr<LayerCache> PreNormDecoderLayer::create_cache(int64_t capacity) {
  return std::make_unique<KeyValueCache>(capacity);
}

at::Tensor PreNormDecoderLayer::forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& rotary,
                                               const CachedStep& step) {
  return forward_cached_stream({x, at::Tensor()}, rotary, step).materialized();
}

ResidualStream PreNormDecoderLayer::forward_cached_stream(const ResidualStream& stream,
                                                          const std::vector<at::Tensor>& rotary,
                                                          const CachedStep& step) {
  if (decode_norm_gemv_switched_on()) {  // both norms folded into the products after them
    const NormedProduct qkv =
        input_layernorm->forward_of_stream_times(stream, self_attn->qkv_proj->matrix_at_decode(), DecodeProduct::Plain);
    if (qkv.product.defined())
      return with_attention_at_decode(
          qkv.sum, self_attn->forward_cached_projected(qkv.product, rotary.at(0), rotary.at(1), step));
  }
  const auto [x, normed] = input_layernorm->forward_of_stream(stream);
  return with_attention_at_decode(x, self_attn->forward_cached(normed, rotary.at(0), rotary.at(1), step));
}

ResidualStream PreNormDecoderLayer::with_attention(const at::Tensor& x, const at::Tensor& attended) {
  const auto [h, normed] = post_attention_layernorm->forward_after_add(x, attended);  // h = x + attended
  return {h, mlp.forward(normed)};  // the next layer's norm adds them
}

ResidualStream PreNormDecoderLayer::with_attention_at_decode(const at::Tensor& x, const at::Tensor& attended) {
  if (decode_norm_gemv_switched_on())
    if (const auto* swiglu = dynamic_cast<const SwiGluMlp*>(mlp.module.get())) {
      const NormedProduct activated = post_attention_layernorm->forward_of_stream_times(
          {x, attended}, swiglu->gate_up_matrix_at_decode(), DecodeProduct::GateUpSwiglu);
      if (activated.product.defined()) return {activated.sum, swiglu->down_proj->forward(activated.product)};
    }
  return with_attention(x, attended);
}

}  // namespace triax
