#include "decoder_layer.hpp"

#include "triax/layers/recompute.hpp"

namespace triax::llama {

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& config, const ModelContext& context)
    : recompute_(context.recompute_layer) {
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
  if (!recompute_) return compute(x, cos, sin);
  return recompute([this](const std::vector<at::Tensor>& in) { return compute(in[0], in[1], in[2]); }, {x, cos, sin},
                   parameters());
}

at::Tensor LlamaDecoderLayer::compute(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), cos, sin);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

}  // namespace triax::llama
