#include "llama_model.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "llama_init.hpp"
#include "tied_embeddings.hpp"
#include "triax/error.hpp"
#include "triax/layers/cross_entropy.hpp"
#include "triax/layers/fused_linear_cross_entropy.hpp"

namespace triax::llama {
namespace {

void check_tensor_parallel_split(ConfigReader& reader, const LlamaConfig& config, int tp_size) {
  auto check = [&](const char* key, int64_t value) {
    if (value % tp_size != 0)
      reader.fail(key,
                  std::to_string(value) + " is not divisible by the tensor parallel size " + std::to_string(tp_size));
  };
  check("hidden_size", config.hidden_size);
  check("num_attention_heads", config.num_attention_heads);
  check("num_key_value_heads", config.num_key_value_heads);
  check("intermediate_size", config.intermediate_size);
}

}  // namespace

std::vector<double> LlamaModel::block_costs(ConfigReader& reader, int64_t sequence_length) {
  LlamaConfig config = LlamaConfig::read(reader);
  // The host asks for the costs before building anything: the place to refuse a sequence the
  // rotary tables cannot cover.
  if (sequence_length > config.max_position_embeddings)
    reader.fail("max_position_embeddings", "is " + std::to_string(config.max_position_embeddings) +
                                               ", shorter than tokens.sequence_length (" +
                                               std::to_string(sequence_length) + ")");
  return llama_block_costs(config, sequence_length);
}

std::shared_ptr<LlamaModel> LlamaModel::create(ConfigReader& reader, const ModelContext& context) {
  LlamaConfig config = LlamaConfig::read(reader);
  check_tensor_parallel_split(reader, config, context.tp_size);
  if (context.pp_size > config.num_hidden_layers)
    reader.fail("num_hidden_layers",
                std::to_string(config.num_hidden_layers) + " layers cannot fill a pipeline of parallelism.pp = " +
                    std::to_string(context.pp_size) + " ranks (pp must be at most the layer count)");
  if (context.first_block < 0 || context.first_block >= context.last_block || context.last_block > config.num_blocks())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "llama: blocks [" + std::to_string(context.first_block) + ", " + std::to_string(context.last_block) +
                    ") are not a non-empty range of the model's " + std::to_string(config.num_blocks()) + " blocks");
  // Read before allocating anything, so that a bad init_method fails fast.
  InitMethod init = read_init_method(context.init_method, config);
  auto model = std::make_shared<LlamaModel>(config, context, to_yaml_text(reader.resolved()));
  initialize_parameters(model->parameter_table(), init, context.seed);
  return model;
}

LlamaModel::LlamaModel(const LlamaConfig& config, const ModelContext& context, std::string resolved_yaml)
    : config_(config),
      tp_(TensorParallel::of(context)),
      padded_vocab_size_(context.padded_vocab_size(config.vocab_size)),
      resolved_yaml_(std::move(resolved_yaml)) {
  const int64_t h = config.hidden_size;
  const int head_block = config.head_block();
  embeds_tokens_ = context.holds_block(0);
  const bool holds_head = context.holds_block(head_block);
  const bool tied = config.tie_word_embeddings;

  body_ = register_module("model", std::make_shared<torch::nn::Module>("LlamaBody"));

  if (embeds_tokens_ || (tied && holds_head)) {
    embed_tokens_ = std::make_shared<VocabParallelEmbedding>(padded_vocab_size_, h, context.device, context.dtype, tp_);
    embed_tokens_->mark_padding("weight", {config.vocab_size, h});
    if (tied && embeds_tokens_ != holds_head)  // the other copy lives on another pipeline stage
      embed_tokens_->tie_parameter("weight", kTiedEmbeddingKey);
    body_->register_module("embed_tokens", embed_tokens_);
  }

  const int first_layer_block = std::max(context.first_block, 1);
  const int end_layer_block = std::min(context.last_block, head_block);
  if (first_layer_block < end_layer_block) {
    auto layers = body_->register_module("layers", std::make_shared<torch::nn::Module>("LlamaLayers"));
    for (int block = first_layer_block; block < end_layer_block; ++block) {
      layers_.push_back(
          layers->register_module(std::to_string(block - 1), std::make_shared<LlamaDecoderLayer>(config, context)));
    }
  }

  if (holds_head)
    norm_ = body_->register_module(
        "norm", std::make_shared<RMSNorm>(h, config.rms_norm_eps, context.device, context.dtype, tp_));
  // One cos/sin table for all of this stage's layers (buffers, not parameters).
  if (!layers_.empty())
    rotary_emb_ = body_->register_module("rotary_emb", std::make_shared<RotaryEmbedding>(config, context.device));

  if (holds_head) {
    if (tied) {
      lm_head_ = make_tied_lm_head(embed_tokens_->weight, h, padded_vocab_size_, tp_);
    } else {
      lm_head_ = register_module(
          "lm_head", std::make_shared<ColumnParallelLinear>(LinearOptions::of(h, padded_vocab_size_, context), tp_));
      lm_head_->mark_padding("weight", {config.vocab_size, h});
    }
  }
}

StageOutput LlamaModel::forward(const StageInput& input) {
  at::Tensor hidden;
  if (embeds_tokens_) {
    if (!input.input_ids.defined()) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "llama: the first stage needs input_ids");
    hidden = embed_tokens_->forward(input.input_ids);
  } else {
    if (!input.hidden_in.defined())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "llama: a stage without the embedding block needs hidden_in");
    hidden = input.hidden_in;
  }

  if (!layers_.empty()) {
    // Positions 0..seq-1 of the whole sequence: attention runs on it even when hidden holds a
    // sequence shard (REDUCE_SCATTER). input_ids is given on every stage.
    const int64_t sequence_length = input.input_ids.defined()           ? input.input_ids.size(1)
                                    : tp_.mode == TpMode::ReduceScatter ? hidden.size(1) * tp_.size
                                                                        : hidden.size(1);
    auto [cos, sin] = rotary_emb_->tables(sequence_length, hidden.scalar_type());
    for (const auto& layer : layers_) hidden = layer->forward(hidden, cos, sin);
  }

  StageOutput output;
  if (!lm_head_) {
    output.hidden_out = hidden;
    return output;
  }
  const at::Tensor normed = norm_->forward(hidden);
  const int64_t vocab_start = tp_.shard_offset(padded_vocab_size_);
  at::Tensor mask = input.label_mask.defined() ? input.label_mask.reshape({-1}) : at::Tensor();
  if (input.want_logits) {
    at::Tensor logits = lm_head_->forward(normed);  // [batch, seq, vocab/tp]
    output.logits = logits;
    if (!input.label_ids.defined()) return output;  // logits only (evaluation, export checks)
    output.loss = vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), input.label_ids.reshape({-1}),
                                               mask, vocab_start, config_.vocab_size, tp_);
    return output;
  }
  if (!input.label_ids.defined()) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "llama: the last stage needs label_ids");
  // Training: lm_head and loss fused, chunk by chunk, so the whole batch's logits never exist.
  const at::Tensor head_input = gather_column_parallel_input(normed, tp_);  // [batch, seq, hidden]
  output.loss = fused_linear_cross_entropy(head_input.reshape({-1, head_input.size(-1)}), lm_head_->weight,
                                           input.label_ids.reshape({-1}), mask, vocab_start, config_.vocab_size, tp_);
  return output;
}

double LlamaModel::flops_per_token(int64_t sequence_length) const {
  std::vector<double> costs = llama_block_costs(config_, sequence_length);
  return 3.0 * std::accumulate(costs.begin(), costs.end(), 0.0);
}

int64_t LlamaModel::total_parameters() const {
  const int64_t h = config_.hidden_size;
  const int64_t q = config_.q_features();
  const int64_t kv = config_.kv_features();
  int64_t layer = h * q + 2 * h * kv + q * h + 3 * h * config_.intermediate_size + 2 * h;
  if (config_.attention_bias) layer += q + 2 * kv + h;
  const int64_t embedding = padded_vocab_size_ * h;
  return embedding + config_.num_hidden_layers * layer + h + (config_.tie_word_embeddings ? 0 : embedding);
}

}  // namespace triax::llama
