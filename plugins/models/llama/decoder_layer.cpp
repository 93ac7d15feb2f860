#include "decoder_layer.hpp"

namespace triax::llama {

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& config, const ModelContext& context) {
  // Registration order gives the Hugging Face parameter order.
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(config, context));
  mlp = register_module("mlp", std::make_shared<LlamaMLP>(config, context));
  auto norm = [&] {
    return std::make_shared<RMSNorm>(config.hidden_size, config.rms_norm_eps, context.device, context.dtype,
                                     TensorParallel::of(context));
  };
  input_layernorm = register_module("input_layernorm", norm());
  post_attention_layernorm = register_module("post_attention_layernorm", norm());
}

at::Tensor LlamaDecoderLayer::forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), cos, sin);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

}  // namespace triax::llama
