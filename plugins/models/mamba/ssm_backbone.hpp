// What Hugging Face's Mamba and Mamba-2 language models share around their mixers: the module
// names (backbone.{embeddings, layers.N.{norm, mixer}, norm_f}, lm_head), a final RMSNorm whose
// output returns to the model's dtype (the residual stream may be fp32), the tensor rules of
// everything but the mixer, and the lookup of the mixers' generation caches.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "triax/causal_lm.hpp"
#include "triax/error.hpp"
#include "triax/hf_mapping.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/layers/norm.hpp"
#include "triax/model.hpp"

namespace triax::mamba {

inline CausalLmLayout ssm_backbone_layout(const std::string& model_name, int64_t vocab_size, int64_t hidden_size,
                                          int64_t num_layers, bool tie_word_embeddings) {
  CausalLmLayout layout;
  layout.model_name = model_name;
  layout.vocab_size = vocab_size;
  layout.hidden_size = hidden_size;
  layout.num_layers = num_layers;
  layout.tie_word_embeddings = tie_word_embeddings;
  layout.max_positions = 0;  // no positional tables: any length
  layout.body = "backbone";
  layout.embedding = "embeddings";
  layout.norm = "norm_f";
  return layout;
}

// A scan's state runs along the whole sequence and no cp rank passes it on to the next, so these
// models refuse context parallelism: "the model plugin '<model_name>' <why>".
inline void refuse_context_parallel(const ModelContext& context, const std::string& model_name,
                                    const std::string& why) {
  if (const ContextParallel cp = ContextParallel::of(context.host); cp.active())
    throw Error(TRIAX_ERROR_INVALID_CONFIG, "parallelism.context_parallel_size is " + std::to_string(cp.size) +
                                                ", but the model plugin '" + model_name + "' " + why +
                                                "; set parallelism.context_parallel_size to 1");
}

// norm_f: the residual stream may be fp32 (residual_in_fp32); the head computes in the model's dtype.
inline CausalLmNorm ssm_final_norm(int64_t hidden_size, double eps, const ModelContext& context) {
  auto norm = std::make_shared<RMSNorm>(hidden_size, eps, context.device, context.dtype, TensorParallel::of(context));
  RMSNorm* raw = norm.get();
  const c10::ScalarType dtype = context.dtype;
  return CausalLmNorm{norm, [raw, dtype](const at::Tensor& x) { return raw->forward(x).to(dtype); }};
}

// Every rule in model order: the embedding, per layer its norm then `mixer_rules(rules, prefix)`
// (prefix "backbone.layers.N.mixer."), the final norm and the head.
inline std::vector<HfTensorRule> ssm_backbone_rules(
    int64_t vocab_size, int64_t hidden_size, int64_t num_layers, bool tie_word_embeddings,
    const std::function<void(std::vector<HfTensorRule>& rules, const std::string& mixer)>& mixer_rules) {
  const int64_t h = hidden_size;
  std::vector<HfTensorRule> rules;
  rules.push_back(HfTensorRule::rename("backbone.embeddings.weight", {vocab_size, h}));
  for (int64_t i = 0; i < num_layers; ++i) {
    const std::string layer = "backbone.layers." + std::to_string(i) + ".";
    rules.push_back(HfTensorRule::rename(layer + "norm.weight", {h}));
    mixer_rules(rules, layer + "mixer.");
  }
  rules.push_back(HfTensorRule::rename("backbone.norm_f.weight", {h}));
  add_hf_head_rules(rules, "backbone.embeddings.weight", {vocab_size, h}, tie_word_embeddings);
  return rules;
}

// This layer's cache of each row of `step`, as the model's own cache type.
template <class Cache>
std::vector<Cache*> caches_of(const CachedStep& step, const std::string& model_name) {
  std::vector<Cache*> out;
  for (LayerCache* row : step.rows) {
    auto* cache = dynamic_cast<Cache*>(row);
    if (cache == nullptr) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, model_name + ": a layer cache of another model");
    out.push_back(cache);
  }
  return out;
}

}  // namespace triax::mamba
