// One pre-norm decoder layer (one pipeline block) of the Llama layout, with the MLP the model
// picks (Llama's SwiGluMlp, a mixture-of-experts block, ...):
//   h = x + self_attn(input_layernorm(x));  out = h + mlp(post_attention_layernorm(h)),
// self_attn grouped-query attention with rotary embeddings, the norms RMSNorms over hidden_size.
// Each residual add is done inside the norm after it (add_rms_norm): the one after attention by
// post_attention_layernorm, the one after the MLP by the next layer's input_layernorm. At a
// decoding step with TRIAX_DECODE_NORM_GEMV=1 the norms (and their adds) are done inside the
// products after them: q/k/v's and a SwiGluMlp's gate/up (decode_norm_gemv.hpp).
// The layers of a stage share the rotary tables, given as the layer inputs {cos, sin}, followed
// in a masked forward by CausalLm's MaskedAttention tensors (triax/layers/attention_mask.hpp).
//
// Submodules, registered in Hugging Face's parameter order: self_attn, mlp, input_layernorm,
// post_attention_layernorm.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "triax/causal_lm.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/unary_module.hpp"
#include "triax/model.hpp"

namespace triax {

class PreNormDecoderLayer : public CausalLmLayer {
 public:
  // mlp_block: [batch, seq, hidden] -> the same shape ([batch, seq/tp, hidden] in REDUCE_SCATTER mode).
  PreNormDecoderLayer(const AttentionShape& attention, double rms_norm_eps, UnaryModule mlp_block,
                      const ModelContext& context);

  // x: [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode); rotary: {cos, sin},
  // [seq, head_dim] of the whole sequence, in x's dtype.
  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>& rotary) override;
  // The add after the MLP is left pending; a pending add coming in is done by input_layernorm's
  // kernel (add_rms_norm).
  ResidualStream forward_stream(const ResidualStream& stream, const std::vector<at::Tensor>& rotary) override;
  std::unique_ptr<LayerCache> create_cache(int64_t capacity) override;  // a KeyValueCache
  // rotary: the whole tables, [max_position_embeddings, head_dim].
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& rotary,
                            const CachedStep& step) override;
  // As forward_stream: the MLP's add left pending, a pending one done by input_layernorm's kernel.
  ResidualStream forward_cached_stream(const ResidualStream& stream, const std::vector<at::Tensor>& rotary,
                                       const CachedStep& step) override;

  std::shared_ptr<GroupedQueryAttention> self_attn;
  UnaryModule mlp;
  std::shared_ptr<RMSNorm> input_layernorm;
  std::shared_ptr<RMSNorm> post_attention_layernorm;

 private:
  ResidualStream with_attention(const at::Tensor& x, const at::Tensor& attended);
  // with_attention at a decoding step: with TRIAX_DECODE_NORM_GEMV=1, post_attention_layernorm
  // folded into a SwiGluMlp's gate/up product (decode_norm_gemv.hpp).
  ResidualStream with_attention_at_decode(const at::Tensor& x, const at::Tensor& attended);
};

}  // namespace triax
