// GPT-2 (Hugging Face GPT2LMHeadModel) as a triax model plugin: a causal LM (triax/causal_lm.hpp)
// with learned positions, pre-norm blocks of LayerNorm, multi-head attention and a GELU MLP, all
// with biases, and tied embeddings. Parameter names and layouts are Hugging Face's (transformer.wte,
// transformer.h.{i}.attn.c_attn, ...), Conv1D weights [in, out]; c_attn keeps q, k, v apart:
// [n_embd, 3, n_embd].
#pragma once

#include <triax/causal_lm.hpp>
#include <triax/hf_mapping.hpp>
#include <triax/layers/ungated_mlp.hpp>
#include <triax/layers/multi_head_attention.hpp>
#include <triax/layers/norm.hpp>

#include <memory>
#include <string>
#include <vector>

namespace gpt2 {

// model.model_config: Hugging Face GPT2Config's keys and defaults, read strictly.
struct Gpt2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // learned positions: the longest sequence
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_inner = 0;  // the MLP's width; null or absent: 4 x n_embd
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;
  bool tie_word_embeddings = true;
  int64_t bos_token_id = 50256;
  int64_t eos_token_id = 50256;

  // Reads every key of `reader` and calls reader.finish(); a bad value names its key.
  static Gpt2Config read(triax::ConfigReader& reader);
};

// Forward FLOPs per token of each pipeline block: embedding, n_layer layers, head.
std::vector<double> block_costs(const Gpt2Config& c, int64_t sequence_length);

// One block: h = x + attn(ln_1(x)); out = h + mlp(ln_2(h)). Its cache: attention's keys and values.
class Gpt2Block : public triax::CausalLmLayer {
 public:
  Gpt2Block(const Gpt2Config& config, const triax::ModelContext& context);
  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>& shared) override;
  std::unique_ptr<triax::LayerCache> create_cache(int64_t capacity) override;
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& shared,
                            const triax::CachedStep& step) override;

  std::shared_ptr<triax::LayerNorm> ln_1, ln_2;
  std::shared_ptr<triax::MultiHeadAttention> attn;
  std::shared_ptr<triax::UngatedMlp> mlp;  // UngatedMlpOptions::gpt2()

 private:
  at::Tensor with_attention(const at::Tensor& x, const at::Tensor& attended);  // the residuals and the MLP
};

class Gpt2Model : public triax::CausalLm {
 public:
  // What the host asks before any instance exists (triax/plugin.hpp).
  static std::vector<double> block_costs(triax::ConfigReader& config, int64_t sequence_length);
  static std::shared_ptr<Gpt2Model> create(triax::ConfigReader& config, const triax::ModelContext& context);
  static int64_t vocab_size(triax::ConfigReader& config) { return Gpt2Config::read(config).vocab_size; }
  static constexpr const char* kFlopsFormula = "3 x forward at 2 FLOPs per multiply-add, no causal discount";
  // parallelism.recompute_mlp_activation: its MLP is the SDK's UngatedMlp, which honours it.
  static constexpr bool kRecomputesMlpActivation = true;
  static triax::HfMapping hf_mapping();  // GPT2LMHeadModel (hf_mapping.cpp)

  Gpt2Model(const Gpt2Config& config, const triax::ModelContext& context, std::string resolved_yaml);
  double flops_per_token(int64_t sequence_length) const override;
  int64_t total_parameters() const override;
  std::string resolved_config() const override { return resolved_yaml_; }

 private:
  Gpt2Config config_;
  std::string resolved_yaml_;
};

}  // namespace gpt2
