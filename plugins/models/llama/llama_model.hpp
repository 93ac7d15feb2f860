// The Llama model (Hugging Face LlamaForCausalLM) as a triax model plugin: a causal LM
// (triax/causal_lm.hpp) of the SDK's PreNormDecoderLayer around a SwiGluMlp and a final RMSNorm.
// Parameter names are Hugging Face's:
//   model.embed_tokens.weight
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight
//   model.layers.{i}.{input_layernorm,post_attention_layernorm}.weight
//   model.norm.weight
//   lm_head.weight                      (untied embeddings only)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "llama_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/config_reader.hpp"
#include "triax/hf_mapping.hpp"
#include "triax/init.hpp"
#include "triax/layers/pre_norm_decoder_layer.hpp"
#include "triax/layers/rotary_embedding.hpp"

namespace triax::llama {

class LlamaModel : public CausalLm {
 public:
  // Forward FLOPs per token of each pipeline block (L + 2 of them).
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  // Reads model.model_config strictly, builds this rank's blocks and initialises them.
  static std::shared_ptr<LlamaModel> create(ConfigReader& config, const ModelContext& context);
  // Decoder layer `layer`: the SDK's pre-norm layer around a SwiGLU MLP.
  static std::shared_ptr<PreNormDecoderLayer> decoder_layer(const LlamaConfig& config, const ModelContext& context,
                                                            int64_t layer);
  // A model M (LlamaModel or one of its variants: Qwen2Model) of `config`, read from `reader`:
  // the tensor-parallel split and the stage checked, the parameters initialised.
  template <class M>
  static std::shared_ptr<M> create_as(ConfigReader& reader, const LlamaConfig& config, const ModelContext& context) {
    const ScaledInitMethod init = checked_init(reader, config, context);
    auto model = std::make_shared<M>(config, context, to_yaml_text(reader.resolved()));
    init_scaled(model->parameter_table(), init, context.seed, {"o_proj.weight", "down_proj.weight"});
    return model;
  }
  // What the host asks before any instance exists (triax/plugin.hpp).
  static constexpr const char* kNanotronMarker = "is_llama_config";
  static constexpr const char* kFlopsFormula =
      "6N + 12*L*h*s: 3 x forward at 2 FLOPs per multiply-add, attention scores without causal discount (PaLM)";
  static int64_t vocab_size(ConfigReader& config) { return LlamaConfig::read(config).vocab_size; }
  static HfMapping hf_mapping();  // LlamaForCausalLM (hf_mapping.cpp)
  // model.init_method.use_mup: every parameter comes from the SDK's layers, which declare roles.
  static constexpr bool kSupportsMup = true;
  // parallelism.recompute_mlp_activation: its MLP is the SDK's SwiGluMlp, which honours it.
  static constexpr bool kRecomputesMlpActivation = true;

  // model_name prefixes messages ("llama", "qwen2").
  LlamaModel(const LlamaConfig& config, const ModelContext& context, std::string resolved_yaml,
             const std::string& model_name = "llama");

  double flops_per_token(int64_t sequence_length) const override;
  int64_t total_parameters() const override;
  std::string resolved_config() const override { return resolved_yaml_; }

  const LlamaConfig& config() const { return config_; }

 protected:
  // The rotary tables, shared by every decoder layer of the stage.
  std::vector<at::Tensor> layer_inputs(int64_t positions, c10::ScalarType dtype) override;
  // Its decoder layers' cached attention writes in place and waits for nothing.
  bool captures_decode_steps(int64_t) const override { return true; }

 private:
  // The checks before allocating anything, and the init method (read first, so that a bad one fails fast).
  static ScaledInitMethod checked_init(ConfigReader& reader, const LlamaConfig& config, const ModelContext& context);

  LlamaConfig config_;
  std::string resolved_yaml_;
  std::shared_ptr<RotaryEmbedding> rotary_emb_;  // when any decoder layer is held
};

}  // namespace triax::llama
