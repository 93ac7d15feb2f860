// One pre-norm Llama decoder layer (one pipeline block):
//   h = x + self_attn(input_layernorm(x));  out = h + mlp(post_attention_layernorm(h)).
// Each residual add is done inside the norm after it (add_rms_norm): the one after attention by
// post_attention_layernorm, the one after the MLP by the next layer's input_layernorm.
// The layers of a stage share the rotary tables, given as the layer inputs {cos, sin}.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "llama_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/swiglu_mlp.hpp"
#include "triax/model.hpp"

namespace triax::llama {

class LlamaDecoderLayer : public CausalLmLayer {
 public:
  LlamaDecoderLayer(const LlamaConfig& config, const ModelContext& context);

  // x: [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode); rotary: {cos, sin},
  // [seq, head_dim] of the whole sequence, in x's dtype.
  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>& rotary) override;
  // The add after the MLP is left pending; a pending add coming in is done by input_layernorm's
  // kernel (add_rms_norm).
  ResidualStream forward_stream(const ResidualStream& stream, const std::vector<at::Tensor>& rotary) override;
  std::unique_ptr<LayerCache> create_cache(int64_t capacity) override;
  // rotary: the whole tables, [max_position_embeddings, head_dim].
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& rotary,
                            const CachedStep& step) override;

  std::shared_ptr<RMSNorm> input_layernorm;
  std::shared_ptr<GroupedQueryAttention> self_attn;
  std::shared_ptr<RMSNorm> post_attention_layernorm;
  std::shared_ptr<SwiGluMlp> mlp;

 private:
  ResidualStream with_attention(const at::Tensor& x, const at::Tensor& attended);
};

}  // namespace triax::llama
