// CausalLm's inference with a cache: a sequence's cache is one LayerCache per layer of the stage.
#include <ATen/ATen.h>

#include <algorithm>

#include "cached_decode_graph.hpp"
#include "triax/causal_lm.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

class CausalLmCache : public InferenceCache {
 public:
  CausalLmCache(const CausalLm* model, int64_t capacity) : InferenceCache(capacity), owner(model) {}
  void stored(int64_t tokens) { advance(tokens); }

  const CausalLm* owner;
  std::vector<std::unique_ptr<LayerCache>> layers;  // one per layer of the owner's stage
};

// starts[i] + j for j < columns on `device`: one small upload that the host does not wait for
// (from pinned memory on CUDA), so no step waits for the GPU here.
at::Tensor positions_of(const std::vector<int64_t>& starts, int64_t columns, const c10::Device& device) {
  const auto rows = static_cast<int64_t>(starts.size());
  at::Tensor host = at::empty({rows, columns}, at::TensorOptions().dtype(at::kLong).pinned_memory(device.is_cuda()));
  int64_t* out = host.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j) out[i * columns + j] = starts[static_cast<size_t>(i)] + j;
  return host.to(device, /*non_blocking=*/true);
}

}  // namespace

std::unique_ptr<InferenceCache> CausalLm::create_cache(int64_t max_tokens) {
  decode_graph_.reset();  // a new cache may take the address of one the graph recorded
  const std::string& name = layout_.model_name;
  if (zero3_)
    throw Error(TRIAX_ERROR_UNSUPPORTED, name + ": a model whose parameters are ZeRO-3 shards keeps no inference cache");
  if (max_tokens < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                name + ": a cache holds at least one token, max_tokens is " + std::to_string(max_tokens));
  if (layout_.max_positions > 0 && max_tokens > layout_.max_positions)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, name + ": a cache of " + std::to_string(max_tokens) +
                                                  " tokens exceeds the model's " +
                                                  std::to_string(layout_.max_positions) + " positions");
  auto cache = std::make_unique<CausalLmCache>(this, max_tokens);
  for (const auto& layer : layers_) cache->layers.push_back(layer->create_cache(max_tokens));
  return cache;
}

StageOutput CausalLm::forward_cached(const std::vector<InferenceCache*>& caches, const StageInput& input) {
  at::NoGradGuard no_grad;
  const std::string& name = layout_.model_name;
  const at::Tensor& ids = input.input_ids;
  if (!ids.defined() || ids.dim() != 2 || ids.size(1) < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                name + ": forward_cached needs input_ids [rows, new tokens] (at least one) on every stage");
  const int64_t rows = ids.size(0), fresh = ids.size(1);
  if (rows != static_cast<int64_t>(caches.size()))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, name + ": input_ids has " + std::to_string(rows) + " rows for " +
                                                  std::to_string(caches.size()) + " caches");
  // Every row is checked before any cache changes.
  std::vector<CausalLmCache*> owned;
  CachedStep step;
  step.keep = fresh;
  int64_t end = 0;
  for (int64_t i = 0; i < rows; ++i) {
    auto* cache = dynamic_cast<CausalLmCache*>(caches[static_cast<size_t>(i)]);
    if (cache == nullptr || cache->owner != this)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  name + ": the cache of row " + std::to_string(i) + " was made by another model instance");
    if (cache->length() + fresh > cache->capacity())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  name + ": row " + std::to_string(i) + " holds " + std::to_string(cache->length()) + " tokens; " +
                      std::to_string(fresh) + " more exceed its cache's capacity of " +
                      std::to_string(cache->capacity()) + " tokens (max_tokens of cache_create)");
    owned.push_back(cache);
    step.starts.push_back(cache->length());
    step.capacity = std::max(step.capacity, cache->capacity());
    end = std::max(end, cache->length() + fresh);
  }

  // Sequence parallel: a stage runs on a multiple of tp tokens per row. The tail copies the last
  // token; being last it changes no earlier token, enters no cache and is cut from the logits.
  const bool sharded = tp_.mode == TpMode::ReduceScatter;
  const int64_t padded = sharded ? (fresh + tp_.size - 1) / tp_.size * tp_.size : fresh;
  at::Tensor stage_ids = ids;
  if (padded > fresh) stage_ids = at::cat({ids, ids.narrow(1, fresh - 1, 1).expand({rows, padded - fresh})}, 1);

  // A decoding step as a CUDA graph: one new token per row, the whole model on this rank.
  const bool graphed = input.cuda_graph && ids.is_cuda() && fresh == 1 && tp_.size == 1 && embeds_tokens_ && head_ &&
                       !position_embedding_ && captures_decode_steps(rows);
  // The device's part of the step: no host synchronisation, and nothing in it depends on the
  // host's values but the shapes and the rows' capacity (what a CUDA graph of it may hold fixed).
  auto device_work = [&](const at::Tensor& step_ids, const at::Tensor& positions) {
    step.positions = positions;
    step.visible = (at::arange(step.capacity, positions.options()).view({1, 1, -1}) <= positions.unsqueeze(2))
                       .unsqueeze(1);
    at::Tensor hidden = stage_input(input, step_ids, step.starts);
    const int64_t expected = sharded ? padded / tp_.size : padded;
    if (hidden.dim() != 3 || hidden.size(0) != rows || hidden.size(1) != expected)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, name + ": hidden_in must be [" + std::to_string(rows) + ", " +
                                                    std::to_string(expected) + ", hidden] for " +
                                                    std::to_string(fresh) + " new tokens per row");
    if (!layers_.empty()) {
      // Padding may reach past the last position: the layers clamp its positions to the tables.
      // Without a model limit a graphed step's tables cover the rows' capacity, which the graph holds fixed.
      const int64_t table = layout_.max_positions > 0 ? layout_.max_positions
                            : graphed                 ? step.capacity
                                                      : end + padded - fresh;
      const std::vector<at::Tensor> shared = layer_inputs(table, hidden.scalar_type());
      // Each layer's last add is done by the next layer's norm kernel.
      ResidualStream stream{hidden, at::Tensor()};
      for (size_t l = 0; l < layers_.size(); ++l) {
        step.rows.clear();
        for (CausalLmCache* cache : owned) step.rows.push_back(cache->layers[l].get());
        stream = layers_[l]->forward_cached_stream(stream, shared, step);
      }
      hidden = stream.materialized();
    }
    StageOutput output;
    if (!head_)
      output.hidden_out = hidden;
    else
      output.logits = head_->forward(norm_.forward(hidden)).narrow(1, 0, fresh);
    return output;
  };

  const at::Tensor positions = positions_of(step.starts, padded, ids.device());
  StageOutput output;
  if (graphed) {
    const std::vector<const InferenceCache*> key(owned.begin(), owned.end());
    if (!decode_graph_ || !decode_graph_->serves(key)) decode_graph_ = std::make_shared<CachedDecodeGraph>(key);
    output.logits = decode_graph_->run(stage_ids, positions, [&](const at::Tensor& step_ids, const at::Tensor& at) {
      return device_work(step_ids, at).logits;
    });
  } else {
    decode_graph_.reset();
    output = device_work(stage_ids, positions);
  }
  for (CausalLmCache* cache : owned) cache->stored(fresh);
  return output;
}

}  // namespace triax
