// A causal language model's pipeline stage: the bookkeeping every decoder-only model repeats.
//
// The model's blocks are 0 = token embedding (and learned positions, if any), 1..L = layers,
// L+1 = final norm + lm_head + loss.
// A model derives from CausalLm, provides its layer type (a CausalLmLayer) and its final norm,
// and calls build() from its constructor. CausalLm then
//   - builds and owns this stage's vocab-parallel embedding (plus a learned position embedding
//     when the layout names one, GPT-2's wpe) and head, with tied embeddings across
//     pipeline stages (each holder's copy flagged TRIAX_PARAM_TIED under the embedding's name) and
//     the padded vocabulary rows marked as padding;
//   - holds the layers of the blocks [first_block, last_block) of the context;
//   - runs embedding -> layers -> head: the fused lm_head + cross-entropy when training, the
//     logits when asked, hidden_in / hidden_out at stage boundaries, sequence shards in
//     REDUCE_SCATTER mode, activation recomputation per layer (parallelism.recompute_layer, the first
//     parallelism.recompute_num_layers of the stage);
//   - implements inference with a cache (triax/inference_cache.hpp) from the layers' caches;
//   - with optimizer.zero_stage 3, keeps the parameters as ZeRO-3 shards and runs the embedding,
//     each layer and the head as blocks that gather theirs (causal_lm_zero3.cpp).
// Parameter names follow the layout: <body>.<embedding>.weight, <body>.<layers>.<i>.*,
// <body>.<norm>.*, <head>.weight (Hugging Face's "model.embed_tokens.weight", ... by default).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "triax/config_reader.hpp"
#include "triax/inference_cache.hpp"
#include "triax/layers/attention_mask.hpp"
#include "triax/layers/embedding.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/position_embedding.hpp"
#include "triax/layers/tensor_parallel.hpp"
#include "triax/layers/unary_module.hpp"
#include "triax/model.hpp"
#include "triax/residual_stream.hpp"

namespace triax {

class CachedDecodeGraph;

struct CausalLmLayout {
  std::string model_name;  // prefixes error messages ("llama")
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  bool tie_word_embeddings = false;
  int64_t max_positions = 0;  // the longest sequence the model can place (rotary tables); 0: no limit
  std::string body = "model", embedding = "embed_tokens", layers = "layers", norm = "norm", head = "lm_head";
  // The name of a learned absolute position embedding of max_positions rows (GPT-2's "wpe"),
  // registered after the token embedding and added to it; empty: none.
  std::string position_embedding;
  // Documents and sliding window (attention_mask.hpp): when it masks, every forward builds one mask
  // and appends its MaskedAttention tensors to the layers' shared inputs.
  AttentionMasking attention;
  // > 0: the z-loss, this times the mean over counted tokens of logsumexp(logits)^2, a named
  // auxiliary loss "z_loss" of training forwards (added to the objective and logged). Last, so
  // that layouts written as lists of values keep compiling.
  double z_loss_coefficient = 0.0;
};

// One cached forward as a layer sees it (CausalLmLayer::forward_cached).
struct CachedStep {
  std::vector<LayerCache*> rows;  // this layer's part of each row's cache
  std::vector<int64_t> starts;    // each row's tokens cached before this forward: its first new position
  int64_t keep = 0;               // new tokens per row that enter the caches; the rest is sequence-parallel padding
  int64_t capacity = 0;           // the largest capacity among the rows' caches
  // On the activations' device, made once per forward for every layer: [rows, new] the positions
  // of the new tokens (starts[i] + j, padding included), and [rows, 1, new, capacity] whether a
  // cached position p is visible from new token j of row i (p <= starts[i] + j).
  at::Tensor positions, visible;
  // Attention masks made of `visible` once per forward for every layer that shares their key
  // (query heads per key head, window or -1, dtype): filled by the first such layer.
  mutable std::map<std::tuple<int64_t, int64_t, c10::ScalarType>, at::Tensor> attention_masks;
};

// One layer of a causal LM (one pipeline block).
class CausalLmLayer : public torch::nn::Module {
 public:
  // hidden: [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode) -> the same
  // shape. `shared`: what the model prepared for every layer of this forward
  // (CausalLm::layer_inputs, e.g. rotary tables).
  virtual at::Tensor forward(const at::Tensor& hidden, const std::vector<at::Tensor>& shared) = 0;
  // forward() on the stream's sum, which it may return with the last add left pending. CausalLm
  // runs its layers through this one (except recomputed layers, which take and give one tensor).
  // Default: forward(stream.materialized(), shared), nothing pending.
  virtual ResidualStream forward_stream(const ResidualStream& stream, const std::vector<at::Tensor>& shared);
  // This layer's part of one sequence's cache of up to `capacity` tokens. Default: no cache.
  virtual std::unique_ptr<LayerCache> create_cache(int64_t capacity);
  // forward() over new tokens continuing the rows of `step`, storing the first step.keep of them.
  virtual at::Tensor forward_cached(const at::Tensor& hidden, const std::vector<at::Tensor>& shared,
                                    const CachedStep& step);
  // forward_cached() on the stream's sum, which it may return with the last add left pending (as
  // forward_stream does). CausalLm's cached forward runs its layers through this one. Default:
  // forward_cached(stream.materialized(), shared, step), nothing pending.
  virtual ResidualStream forward_cached_stream(const ResidualStream& stream, const std::vector<at::Tensor>& shared,
                                               const CachedStep& step);
};

// A model's final norm as CausalLm runs it: the module (registered under layout.norm) and its forward.
using CausalLmNorm = UnaryModule;

class CausalLm : public Model {
 public:
  // Refuses, before anything is allocated, a pipeline longer than the layer count (ConfigError
  // naming `layers_key` of `config`) and a block range outside the model's L + 2 blocks.
  static void check_stage(ConfigReader& config, const char* layers_key, int64_t num_layers,
                          const ModelContext& context, const std::string& model_name);

  StageOutput forward(const StageInput& input) override;
  std::vector<std::string> aux_loss_names() const override;  // "z_loss" with the layout's z-loss
  void prepare_parameters() override;  // ZeRO-3: the parameters become their shards
  std::unique_ptr<InferenceCache> create_cache(int64_t max_tokens) override;
  StageOutput forward_cached(const std::vector<InferenceCache*>& caches, const StageInput& input) override;

  bool embeds_tokens() const { return embeds_tokens_; }
  bool has_head() const { return head_ != nullptr; }
  int64_t padded_vocab_size() const { return padded_vocab_size_; }

 protected:
  CausalLm(CausalLmLayout layout, const ModelContext& context);

  // Builds this stage's modules in the order of their parameters: embedding, layers (make_layer(i)
  // for the held layer i, 0-based), final norm and head. Call once, from the constructor.
  void build(const std::function<std::shared_ptr<CausalLmLayer>(int64_t layer)>& make_layer,
             const std::function<CausalLmNorm()>& make_norm);

  // The tensors every layer of one forward reads, for positions 0..positions-1, in the
  // activations' dtype (rotary tables); computed once per forward. Default: none.
  virtual std::vector<at::Tensor> layer_inputs(int64_t positions, c10::ScalarType dtype);

  // Whether a decoding step of forward_cached (one new token per row, the whole model on this
  // rank, tp 1) may run as a CUDA graph when the host asks (StageInput::cuda_graph): every
  // layer's cached forward synchronises nothing with the host, takes the new tokens' positions
  // from CachedStep::positions, and writes its caches in place (as PreNormDecoderLayer's
  // attention does). layer_inputs() is then asked for max_positions positions, or for the rows'
  // capacity where the layout sets no limit. Default: no.
  // rows: the step's rows, one new token each.
  virtual bool captures_decode_steps(int64_t /*rows*/) const { return false; }

  torch::nn::Module& body() { return *body_; }
  const std::vector<std::shared_ptr<CausalLmLayer>>& layers() const { return layers_; }
  const CausalLmLayout& layout() const { return layout_; }

 private:
  // position_ids: the input's in-document positions, or undefined.
  at::Tensor run_layers(at::Tensor hidden, int64_t sequence_length, const at::Tensor& position_ids = {});
  // The first stage's embedding of `ids` (row i's first token at position starts[i]; no starts:
  // 0), or hidden_in on a later stage.
  at::Tensor stage_input(const StageInput& input, const at::Tensor& ids, const std::vector<int64_t>& starts = {}) const;
  StageOutput head_output(const at::Tensor& hidden, const StageInput& input);
  // ZeRO-3 (causal_lm_zero3.cpp): the same three steps, each a block gathering its parameters.
  struct Zero3Blocks;
  at::Tensor zero3_embedding(const at::Tensor& ids) const;
  at::Tensor zero3_layers(const at::Tensor& hidden, const std::vector<at::Tensor>& shared);
  StageOutput zero3_head_output(const at::Tensor& hidden, const StageInput& input);

  CausalLmLayout layout_;
  ModelContext context_;
  TensorParallel tp_;
  int64_t padded_vocab_size_;
  bool embeds_tokens_ = false;  // this stage runs block 0
  bool built_ = false;

  std::shared_ptr<torch::nn::Module> body_;
  // Held when this stage embeds tokens, or computes a head tied to the embedding.
  std::shared_ptr<VocabParallelEmbedding> embedding_;
  std::shared_ptr<PositionEmbedding> position_embedding_;  // first stage, with layout.position_embedding
  std::vector<std::shared_ptr<CausalLmLayer>> layers_;
  CausalLmNorm norm_;                           // last stage
  std::shared_ptr<ColumnParallelLinear> head_;  // last stage; tied: computes with embedding_->weight
  std::shared_ptr<CachedDecodeGraph> decode_graph_;  // forward_cached's decoding steps, as a CUDA graph
  std::shared_ptr<Zero3Blocks> zero3_;               // with zero_stage 3, after prepare_parameters()
};

}  // namespace triax
