// One pre-norm Llama decoder layer (one pipeline block):
//   h = x + self_attn(input_layernorm(x));  out = h + mlp(post_attention_layernorm(h)).
// With parallelism.recompute_layer the layer keeps only its input for backward and computes
// its activations again there (triax/layers/recompute.hpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>

#include "attention.hpp"
#include "llama_config.hpp"
#include "mlp.hpp"
#include "triax/layers/norm.hpp"
#include "triax/model.hpp"

namespace triax::llama {

class LlamaDecoderLayer : public torch::nn::Module {
 public:
  LlamaDecoderLayer(const LlamaConfig& config, const ModelContext& context);

  // x: [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode); cos, sin:
  // [seq, head_dim] of the whole sequence, in x's dtype.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

  std::shared_ptr<RMSNorm> input_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<RMSNorm> post_attention_layernorm;
  std::shared_ptr<LlamaMLP> mlp;

 private:
  at::Tensor compute(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

  bool recompute_ = false;
};

}  // namespace triax::llama
