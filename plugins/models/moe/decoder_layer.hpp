// One pre-norm decoder layer (one pipeline block), the Llama layout with a mixture of experts:
//   h = x + self_attn(input_layernorm(x));  out = h + mlp(post_attention_layernorm(h)),
// mlp a MoeBlock on the layers of moe_config.layers and a dense SwiGLU block on the others.
// The layers of a stage share the rotary tables, given as the layer inputs {cos, sin}.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "moe_block.hpp"
#include "moe_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/swiglu_mlp.hpp"

namespace triax::moe {

class MoeDecoderLayer : public CausalLmLayer {
 public:
  MoeDecoderLayer(const MoeConfig& config, int64_t layer, const ModelContext& context);

  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>& rotary) override;
  // The add after the MLP is left pending; a pending add coming in is done by input_layernorm.
  ResidualStream forward_stream(const ResidualStream& stream, const std::vector<at::Tensor>& rotary) override;
  std::unique_ptr<LayerCache> create_cache(int64_t capacity) override;
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& rotary,
                            const CachedStep& step) override;

  std::shared_ptr<RMSNorm> input_layernorm;
  std::shared_ptr<GroupedQueryAttention> self_attn;
  std::shared_ptr<RMSNorm> post_attention_layernorm;
  std::shared_ptr<MoeBlock> moe_mlp;      // a MoE layer
  std::shared_ptr<SwiGluMlp> dense_mlp;   // the others

 private:
  ResidualStream with_attention(const at::Tensor& x, const at::Tensor& attended);
};

}  // namespace triax::moe
