// The Llama model (Hugging Face LlamaForCausalLM) as a triax model plugin.
//
// Pipeline blocks: 0 = token embedding, 1..L = decoder layers, L+1 = final RMSNorm + lm_head +
// loss. One instance holds the blocks [context.first_block, context.last_block) of its pipeline
// rank: a stage without the embedding takes hidden_in, a stage without the head returns
// hidden_out. Parameter names are Hugging Face's:
//   model.embed_tokens.weight
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight
//   model.layers.{i}.{input_layernorm,post_attention_layernorm}.weight
//   model.norm.weight
//   lm_head.weight                      (untied embeddings only)
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "decoder_layer.hpp"
#include "llama_config.hpp"
#include "rotary_embedding.hpp"
#include "triax/config_reader.hpp"
#include "triax/hf_mapping.hpp"
#include "triax/layers/embedding.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/tensor_parallel.hpp"
#include "triax/model.hpp"

namespace triax::llama {

class LlamaModel : public Model {
 public:
  // Forward FLOPs per token of each pipeline block (L + 2 of them).
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  // Reads model.model_config strictly, builds this rank's blocks and initialises them.
  static std::shared_ptr<LlamaModel> create(ConfigReader& config, const ModelContext& context);
  // What the host asks before any instance exists (triax/plugin.hpp).
  static constexpr const char* kNanotronMarker = "is_llama_config";
  static constexpr const char* kFlopsFormula =
      "6N + 12*L*h*s: 3 x forward at 2 FLOPs per multiply-add, attention scores without causal discount (PaLM)";
  static int64_t vocab_size(ConfigReader& config) { return LlamaConfig::read(config).vocab_size; }
  static HfMapping hf_mapping();  // LlamaForCausalLM (hf_mapping.cpp)

  LlamaModel(const LlamaConfig& config, const ModelContext& context, std::string resolved_yaml);

  StageOutput forward(const StageInput& input) override;
  double flops_per_token(int64_t sequence_length) const override;
  int64_t total_parameters() const override;
  std::string resolved_config() const override { return resolved_yaml_; }

  const LlamaConfig& config() const { return config_; }
  bool embeds_tokens() const { return embeds_tokens_; }
  bool has_head() const { return norm_ != nullptr; }
  int64_t padded_vocab_size() const { return padded_vocab_size_; }

 private:
  LlamaConfig config_;
  TensorParallel tp_;
  int64_t padded_vocab_size_;
  std::string resolved_yaml_;
  bool embeds_tokens_ = false;  // this stage runs block 0

  std::shared_ptr<torch::nn::Module> body_;  // "model"
  // Held when this stage embeds tokens, or computes a head tied to the embedding.
  std::shared_ptr<VocabParallelEmbedding> embed_tokens_;
  std::shared_ptr<RotaryEmbedding> rotary_emb_;  // when any decoder layer is held
  std::vector<std::shared_ptr<LlamaDecoderLayer>> layers_;
  std::shared_ptr<RMSNorm> norm_;                  // last stage
  std::shared_ptr<ColumnParallelLinear> lm_head_;  // last stage; tied: computes with embed_tokens_->weight
};

}  // namespace triax::llama
