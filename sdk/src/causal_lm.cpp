#include "triax/causal_lm.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include "triax/error.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/layers/cross_entropy.hpp"
#include "triax/layers/fused_linear_cross_entropy.hpp"
#include "triax/layers/recompute.hpp"
#include "triax/trace_range.hpp"

namespace triax {
namespace {

// A column-parallel head computing with `embedding_weight` ([vocab/tp, hidden], the embedding's
// vocabulary slice) instead of a weight of its own. It owns no storage and is not registered as a
// submodule: the weight is already registered by the embedding.
std::shared_ptr<ColumnParallelLinear> tied_head(const at::Tensor& embedding_weight, int64_t hidden_size,
                                                int64_t padded_vocab_size, const TensorParallel& tp) {
  LinearOptions options;
  options.in_features = hidden_size;
  options.out_features = padded_vocab_size;
  options.device = c10::Device(c10::kMeta);  // the placeholder weight allocates nothing
  options.dtype = embedding_weight.scalar_type();
  auto head = std::make_shared<ColumnParallelLinear>(options, tp);
  head->weight = embedding_weight;
  return head;
}

// With context parallelism: this rank's losses as its share of the cp group's mean
// (triax/layers/context_parallel.hpp); z_loss is a mean over the counted tokens too.
void weigh_context_parallel_losses(StageOutput& output, const StageInput& input, const Host& host) {
  const ContextParallel cp = ContextParallel::of(host);
  if (!cp.active() || !output.loss.defined()) return;
  const at::Tensor weight =
      context_parallel_loss_weight(input.label_mask, input.label_ids.numel(), cp, output.loss.device());
  output.loss = output.loss * weight.to(output.loss.scalar_type());
  for (auto& [name, loss] : output.aux_losses) loss = loss * weight.to(loss.scalar_type());
}

}  // namespace

std::unique_ptr<LayerCache> CausalLmLayer::create_cache(int64_t) {
  throw Error(TRIAX_ERROR_UNSUPPORTED, "this model's layers keep no inference cache");
}

ResidualStream CausalLmLayer::forward_stream(const ResidualStream& stream, const std::vector<at::Tensor>& shared) {
  return {forward(stream.materialized(), shared), at::Tensor()};
}

at::Tensor CausalLmLayer::forward_cached(const at::Tensor&, const std::vector<at::Tensor>&, const CachedStep&) {
  throw Error(TRIAX_ERROR_UNSUPPORTED, "this model's layers have no cached forward");
}

ResidualStream CausalLmLayer::forward_cached_stream(const ResidualStream& stream, const std::vector<at::Tensor>& shared,
                                                    const CachedStep& step) {
  return {forward_cached(stream.materialized(), shared, step), at::Tensor()};
}

void CausalLm::check_stage(ConfigReader& config, const char* layers_key, int64_t num_layers,
                           const ModelContext& context, const std::string& model_name) {
  if (context.pp_size > num_layers)
    config.fail(layers_key, std::to_string(num_layers) + " layers cannot fill a pipeline of parallelism.pp = " +
                                std::to_string(context.pp_size) + " ranks (pp must be at most the layer count)");
  const int64_t blocks = num_layers + 2;
  if (context.first_block < 0 || context.first_block >= context.last_block || context.last_block > blocks)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                model_name + ": blocks [" + std::to_string(context.first_block) + ", " +
                    std::to_string(context.last_block) + ") are not a non-empty range of the model's " +
                    std::to_string(blocks) + " blocks");
}

CausalLm::CausalLm(CausalLmLayout layout, const ModelContext& context)
    : layout_(std::move(layout)),
      context_(context),
      tp_(TensorParallel::of(context)),
      padded_vocab_size_(context.padded_vocab_size(layout_.vocab_size)) {}

void CausalLm::build(const std::function<std::shared_ptr<CausalLmLayer>(int64_t)>& make_layer,
                     const std::function<CausalLmNorm()>& make_norm) {
  if (built_) throw Error(layout_.model_name + ": CausalLm::build called twice");
  built_ = true;
  const int64_t h = layout_.hidden_size;
  const int head_block = static_cast<int>(layout_.num_layers + 1);
  embeds_tokens_ = context_.holds_block(0);
  const bool holds_head = context_.holds_block(head_block);
  const bool tied = layout_.tie_word_embeddings;
  const std::string embedding_name = layout_.body + "." + layout_.embedding + ".weight";

  body_ = register_module(layout_.body, std::make_shared<torch::nn::Module>("CausalLmBody"));
  if (embeds_tokens_ || (tied && holds_head)) {
    embedding_ = std::make_shared<VocabParallelEmbedding>(padded_vocab_size_, h, context_.device, context_.dtype, tp_);
    embedding_->mark_padding("weight", {layout_.vocab_size, h});
    if (tied && embeds_tokens_ != holds_head)  // the other copy lives on another pipeline stage
      embedding_->tie_parameter("weight", embedding_name);
    body_->register_module(layout_.embedding, embedding_);
  }
  if (embeds_tokens_ && !layout_.position_embedding.empty()) {
    if (layout_.max_positions <= 0)
      throw Error(layout_.model_name + ": a learned position embedding needs CausalLmLayout::max_positions");
    position_embedding_ = body_->register_module(
        layout_.position_embedding,
        std::make_shared<PositionEmbedding>(layout_.max_positions, h, context_.device, context_.dtype, tp_));
  }

  const int first_layer_block = std::max(context_.first_block, 1);
  const int end_layer_block = std::min(context_.last_block, head_block);
  if (first_layer_block < end_layer_block) {
    auto layers = body_->register_module(layout_.layers, std::make_shared<torch::nn::Module>("CausalLmLayers"));
    for (int block = first_layer_block; block < end_layer_block; ++block)
      layers_.push_back(layers->register_module(std::to_string(block - 1), make_layer(block - 1)));
  }

  if (!holds_head) return;
  norm_ = make_norm();
  body_->register_module(layout_.norm, norm_.module);
  if (tied) {
    head_ = tied_head(embedding_->weight, h, padded_vocab_size_, tp_);
  } else {
    LinearOptions head_options = LinearOptions::of(h, padded_vocab_size_, context_);
    head_options.keeps_model_dtype = true;  // the logits stay out of fp8 (docs/fp8.md)
    head_ = register_module(layout_.head, std::make_shared<ColumnParallelLinear>(head_options, tp_));
    head_->mark_padding("weight", {layout_.vocab_size, h});
  }
}

std::vector<at::Tensor> CausalLm::layer_inputs(int64_t, c10::ScalarType) { return {}; }

std::vector<std::string> CausalLm::aux_loss_names() const {
  if (layout_.z_loss_coefficient > 0.0) return {"z_loss"};
  return {};
}

at::Tensor CausalLm::stage_input(const StageInput& input, const at::Tensor& ids,
                                 const std::vector<int64_t>& starts) const {
  if (embeds_tokens_) {
    if (!ids.defined()) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, layout_.model_name + ": the first stage needs input_ids");
    const TraceRange range("block embedding");
    if (zero3_) return zero3_embedding(ids);
    const at::Tensor tokens = embedding_->forward(ids);
    if (!position_embedding_) return tokens;
    const auto options = at::TensorOptions().dtype(at::kLong).device(ids.device());
    at::Tensor positions = at::arange(ids.size(1), options).unsqueeze(0);  // [1, seq], shared by the rows
    if (!starts.empty()) positions = positions + at::tensor(starts, options).unsqueeze(1);
    return tokens + position_embedding_->forward(positions);
  }
  if (!input.hidden_in.defined())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                layout_.model_name + ": a stage without the embedding block needs hidden_in");
  return input.hidden_in;
}

at::Tensor CausalLm::run_layers(at::Tensor hidden, int64_t sequence_length, const at::Tensor& position_ids) {
  if (layers_.empty()) return hidden;
  const ContextParallel cp = ContextParallel::of(context_);
  // With context parallelism this rank's tokens sit anywhere in the whole sequence.
  std::vector<at::Tensor> shared = layer_inputs(sequence_length * cp.size, hidden.scalar_type());
  if (cp.active()) {
    const MaskedAttention masked =
        context_parallel_attention_inputs(layout_.attention, position_ids, sequence_length, cp, hidden.device());
    for (const at::Tensor& tensor : masked.tensors()) shared.push_back(tensor);
  } else if (layout_.attention.masks()) {
    // Logits without positions (evaluation, export checks): each row is one document.
    AttentionMasking masking = layout_.attention;
    masking.documents = masking.documents && position_ids.defined();
    MaskedAttention masked{attention_mask(masking, position_ids, sequence_length, hidden.device()),
                           masking.documents ? position_ids.to(hidden.device()) : at::Tensor()};
    for (const at::Tensor& tensor : masked.tensors()) shared.push_back(tensor);
  }
  if (zero3_) return zero3_layers(hidden, shared);
  int64_t layer_index = std::max(context_.first_block, 1) - 1;  // of the model, for profiler ranges
  int64_t stage_layer = 0;
  ResidualStream stream{hidden, at::Tensor()};
  for (const auto& layer : layers_) {
    const TraceRange range("block layer " + std::to_string(layer_index++));
    // The first layers of a stage: with 1F1B they hold the most micro-batches in flight.
    const bool recomputed = context_.recompute_layer &&
                            (context_.recompute_layer_count == 0 || stage_layer++ < context_.recompute_layer_count);
    if (!recomputed) {
      stream = layer->forward_stream(stream, shared);
      continue;
    }
    std::vector<at::Tensor> inputs{stream.materialized()};
    inputs.insert(inputs.end(), shared.begin(), shared.end());
    CausalLmLayer* raw = layer.get();
    stream = {recompute(
                  [raw](const std::vector<at::Tensor>& in) {
                    return raw->forward(in[0], std::vector<at::Tensor>(in.begin() + 1, in.end()));
                  },
                  inputs, layer->parameters()),
              at::Tensor()};
  }
  return stream.materialized();  // a stage's output, and the final norm's input, is one tensor
}

StageOutput CausalLm::forward(const StageInput& input) {
  if (layout_.attention.documents && !input.position_ids.defined() && !input.want_logits)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                layout_.model_name +
                    ": model_config._use_doc_masking is true, but the micro-batch came without position_ids (the host "
                    "and the engine pass them from ABI 1.9 on)");
  at::Tensor hidden = stage_input(input, input.input_ids);
  // Positions 0..seq-1 of the whole sequence: layers run on it even when hidden holds a
  // sequence shard (REDUCE_SCATTER). input_ids is given on every stage.
  const int64_t sequence_length = input.input_ids.defined()           ? input.input_ids.size(1)
                                  : tp_.mode == TpMode::ReduceScatter ? hidden.size(1) * tp_.size
                                                                      : hidden.size(1);
  hidden = run_layers(hidden, sequence_length, input.position_ids);
  if (!head_) {
    StageOutput output;
    output.hidden_out = hidden;
    return output;
  }
  StageOutput output = zero3_ ? zero3_head_output(hidden, input) : head_output(hidden, input);
  weigh_context_parallel_losses(output, input, context_.host);
  return output;
}

StageOutput CausalLm::head_output(const at::Tensor& hidden, const StageInput& input) {
  const TraceRange range("block head");
  StageOutput output;
  const at::Tensor normed = norm_.forward(hidden);
  const int64_t vocab_start = tp_.shard_offset(padded_vocab_size_);
  at::Tensor mask = input.label_mask.defined() ? input.label_mask.reshape({-1}) : at::Tensor();
  if (input.want_logits) {
    at::Tensor logits = head_->forward(normed);  // [batch, seq, vocab/tp]
    output.logits = logits;
    if (!input.label_ids.defined()) return output;  // logits only (evaluation, export checks)
    output.loss = vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), input.label_ids.reshape({-1}),
                                               mask, vocab_start, layout_.vocab_size, tp_);
    return output;
  }
  if (!input.label_ids.defined())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, layout_.model_name + ": the last stage needs label_ids");
  // Training: lm_head and loss fused, chunk by chunk, so the whole batch's logits never exist.
  const at::Tensor head_input = gather_column_parallel_input(normed, tp_);  // [batch, seq, hidden]
  const at::Tensor tokens = head_input.reshape({-1, head_input.size(-1)}), labels = input.label_ids.reshape({-1});
  if (layout_.z_loss_coefficient <= 0.0) {
    output.loss = fused_linear_cross_entropy(tokens, head_->weight, labels, mask, vocab_start, layout_.vocab_size, tp_);
    return output;
  }
  const LossAndLogsumexp parts = fused_linear_cross_entropy_with_logsumexp(tokens, head_->weight, labels, mask,
                                                                           vocab_start, layout_.vocab_size, tp_);
  output.loss = parts.loss;
  const at::Tensor squares = parts.logsumexp.square();
  const at::Tensor mean = mask.defined() ? (squares * mask.to(squares.scalar_type())).sum() /
                                               mask.to(squares.scalar_type()).sum().clamp_min(1.0)
                                         : squares.mean();
  output.aux_losses["z_loss"] = mean * layout_.z_loss_coefficient;
  return output;
}

}  // namespace triax
