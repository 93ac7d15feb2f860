// QK-clip (MuonClip) on the model's side: the SDK's attention keeps each query head's largest
// logit while QK-clip tracks them, and a model finds its attention layers and the parameters whose
// query and key rows the factors scale.
#include <ATen/ATen.h>

#include <limits>

#include "triax/error.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/model.hpp"

namespace triax {
namespace {

// What a head's maximum starts from: below every logit.
constexpr double kNoLogitYet = -std::numeric_limits<double>::infinity();

std::vector<std::shared_ptr<GroupedQueryAttention>> attention_layers(torch::nn::Module& root) {
  std::vector<std::shared_ptr<GroupedQueryAttention>> layers;
  for (const auto& module : root.modules(/*include_self=*/false))
    if (auto attention = std::dynamic_pointer_cast<GroupedQueryAttention>(module)) layers.push_back(attention);
  return layers;
}

}  // namespace

void GroupedQueryAttention::track_logits(bool enable) {
  if (!enable) {
    logit_maxima_ = at::Tensor();
    return;
  }
  if (ContextParallel::of(tp_.host).active())
    throw Error(TRIAX_ERROR_UNSUPPORTED, "QK-clip does not track attention logits under context parallelism");
  if (q_norm)  // rescaled query and key rows would be normalised back: the clip could not act
    throw Error(TRIAX_ERROR_UNSUPPORTED, "QK-clip scales query and key rows, which this model's qk-norm (q_norm, "
                                         "k_norm) normalises again; qk-norm bounds the logits by itself");
  logit_maxima_ = at::full({local_heads_}, kNoLogitYet, qkv_proj->weight.options().dtype(at::kFloat));
}

void GroupedQueryAttention::keep_logit_maxima(const at::Tensor& q, const at::Tensor& k, const MaskedAttention& masked) {
  at::NoGradGuard no_grad;
  const at::Tensor keys = k.repeat_interleave(group_, 1).to(at::kFloat);
  at::Tensor logits = at::matmul(q.to(at::kFloat), keys.transpose(-1, -2)) * scale_;  // [batch, heads, seq, seq]
  const int64_t seq = q.size(2);
  const at::Tensor visible = masked.mask.defined()
                                 ? masked.mask
                                 : at::ones({seq, seq}, q.options().dtype(at::kBool)).tril();
  logits = logits.masked_fill(visible.logical_not(), kNoLogitYet);
  logit_maxima_.copy_(at::maximum(logit_maxima_, logits.amax({0, 2, 3})));
}

std::array<at::Tensor, 2> GroupedQueryAttention::qk_clip_factors(double threshold) {
  if (!logit_maxima_.defined())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "QK-clip factors asked of an attention layer that tracks no logits");
  at::NoGradGuard no_grad;
  at::Tensor maxima = logit_maxima_.clone();
  if (tp_.host.valid() && tp_.host.size(TRIAX_GROUP_DP) > 1) tp_.host.all_reduce(TRIAX_GROUP_DP, maxima, TRIAX_REDUCE_MAX);
  logit_maxima_.fill_(kNoLogitYet);
  const at::Tensor eta = at::where(maxima > threshold, threshold / maxima, at::ones_like(maxima))
                             .view({local_kv_heads_, group_});
  const at::Tensor ones = at::ones({local_kv_heads_, 1}, eta.options());
  const bool alone = group_ == 1;  // the key head serves this query head only
  const at::Tensor per_part = at::cat({alone ? eta.sqrt() : eta, alone ? eta.sqrt() : ones, ones}, 1);
  const at::Tensor rows = per_part.unsqueeze(-1).expand({local_kv_heads_, group_ + 2, head_dim_}).reshape(
      {local_kv_heads_, (group_ + 2) * head_dim_});
  return {rows.unsqueeze(-1), rows};
}

void Model::track_attention_logits(bool enable) {
  const auto layers = attention_layers(*this);
  if (layers.empty())
    throw Error(TRIAX_ERROR_UNSUPPORTED, "the model has no attention layer that reports its logits (QK-clip needs the "
                                         "SDK's GroupedQueryAttention)");
  for (const auto& attention : layers) attention->track_logits(enable);
}

std::vector<std::pair<int64_t, at::Tensor>> Model::qk_clip_factors(double threshold) {
  const std::vector<NamedParameter>& table = parameter_table();
  auto index_of = [&](const at::Tensor& tensor) {
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].tensor.unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl()) return static_cast<int64_t>(i);
    throw Error(TRIAX_ERROR_UNSUPPORTED, "QK-clip: an attention layer's q/k/v projection is not among the model's "
                                         "parameters (ZeRO-3 shards?)");
  };
  std::vector<std::pair<int64_t, at::Tensor>> factors;
  for (const auto& attention : attention_layers(*this)) {
    const auto [weight, bias] = attention->qk_clip_factors(threshold);
    factors.emplace_back(index_of(attention->qkv_proj->weight), weight);
    if (attention->qkv_proj->bias.defined()) factors.emplace_back(index_of(attention->qkv_proj->bias), bias);
  }
  return factors;
}

}  // namespace triax
