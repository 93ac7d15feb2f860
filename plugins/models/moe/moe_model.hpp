// A mixture-of-experts decoder (Hugging Face MixtralForCausalLM / Qwen2MoeForCausalLM) as a triax
// model plugin: a causal LM (triax/causal_lm.hpp) of the SDK's PreNormDecoderLayer, its MLP a MoeBlock
// on the layers of moe_config.layers and a dense SwiGluMlp on the others, and a final RMSNorm.
// Parameter names are Qwen2-MoE's (see moe_block.hpp for the MLP's):
//   model.embed_tokens.weight, model.layers.{i}.self_attn.{q,k,v,o}_proj.weight,
//   model.layers.{i}.mlp.*, model.layers.{i}.{input,post_attention}_layernorm.weight,
//   model.norm.weight, lm_head.weight (untied embeddings only)
//
// Named auxiliary losses: the router losses of its MoE layers (router_losses.hpp), with
// moe_config's router_aux_loss_coef and router_z_loss_coef.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "moe_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/config_reader.hpp"
#include "triax/hf_mapping.hpp"
#include "triax/init.hpp"
#include "triax/layers/rotary_embedding.hpp"

namespace triax::moe {

class MoeBlock;

class MoeModel : public CausalLm {
 public:
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  static std::shared_ptr<MoeModel> create(ConfigReader& config, const ModelContext& context);
  // A model M (MoeModel or one of its variants: Qwen3MoeModel) of `config`, read from `reader`:
  // the parallel split and the stage checked, the parameters initialised.
  template <class M>
  static std::shared_ptr<M> create_as(ConfigReader& reader, const MoeConfig& config, const ModelContext& context,
                                      const std::string& model_name) {
    const ScaledInitMethod init = checked_init(reader, config, context, model_name);
    auto model = std::make_shared<M>(config, context, to_yaml_text(reader.resolved()));
    init_scaled(model->parameter_table(), init, context.seed,
                {"o_proj.weight", "down_proj.weight", "experts.down_proj"});
    return model;
  }
  static constexpr const char* kNanotronMarker = "is_qwen2_config";
  static constexpr const char* kNanotronMarkerRequires = "moe_config";
  static constexpr const char* kFlopsFormula =
      "6N_active + 12*L*h*s: N_active counts the top_k routed experts (and the shared one) a token passes through, "
      "3 x forward at 2 FLOPs per multiply-add, attention scores without causal discount (PaLM)";
  static int64_t vocab_size(ConfigReader& config) { return MoeConfig::read(config).vocab_size; }
  static HfMapping hf_mapping();  // MixtralForCausalLM, Qwen2MoeForCausalLM (hf_mapping.cpp)
  // model.init_method.use_mup: the router, the experts and the shared-expert gate declare
  // themselves matrices, the rest are the SDK's layers.
  static constexpr bool kSupportsMup = true;

  // model_name prefixes messages ("moe", "qwen3_moe").
  MoeModel(const MoeConfig& config, const ModelContext& context, std::string resolved_yaml,
           const std::string& model_name = "moe");

  StageOutput forward(const StageInput& input) override;
  std::vector<std::string> aux_loss_names() const override;
  double flops_per_token(int64_t sequence_length) const override;
  int64_t total_parameters() const override;
  std::string resolved_config() const override { return resolved_yaml_; }

  const MoeConfig& config() const { return config_; }

 protected:
  std::vector<at::Tensor> layer_inputs(int64_t positions, c10::ScalarType dtype) override;
  // Where every MoE block serves the step's rows by expert (MoeBlock::serves_by_expert): nothing in
  // the step then waits for the host.
  bool captures_decode_steps(int64_t rows) const override;

 private:
  // The checks before allocating anything, and the init method (read first, so that a bad one fails fast).
  static ScaledInitMethod checked_init(ConfigReader& reader, const MoeConfig& config, const ModelContext& context,
                                       const std::string& model_name);

  MoeConfig config_;
  std::string resolved_yaml_;
  std::shared_ptr<RotaryEmbedding> rotary_emb_;
  std::vector<std::shared_ptr<MoeBlock>> moe_blocks_;  // of this stage's MoE layers, in layer order
};

}  // namespace triax::moe
