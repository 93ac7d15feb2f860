// Inference with a model plugin's cache (ABI 1.3 cache_create, cache_length, forward_cached),
// called through a host model instance's table: what generation runs on. Failures are exceptions
// naming the plugin.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "triax/abi.h"

namespace triax {

class ModelInstance;

// One sequence's inference cache inside a model instance, destroyed through the plugin when it
// goes away. It must not outlive the instance that made it.
class ModelCache {
 public:
  ModelCache(ModelCache&& other) noexcept;
  ModelCache& operator=(ModelCache&&) = delete;
  ModelCache(const ModelCache&) = delete;
  ~ModelCache();

  int64_t length() const;  // tokens seen so far
  triax_cache* handle() const { return handle_; }

 private:
  friend class CachedModel;
  ModelCache(triax_model_ref model, triax_cache* handle) : model_(model), handle_(handle) {}
  triax_model_ref model_;
  triax_cache* handle_;
};

// A model instance seen through its inference cache; it must not outlive the instance.
class CachedModel {
 public:
  explicit CachedModel(const ModelInstance& model);

  // Whether the plugin offers a cache (the ABI 1.3 members present).
  bool has_inference_cache() const;
  // A cache for one sequence of up to max_tokens tokens; refused (TRIAX_ERROR_UNSUPPORTED, naming
  // the plugin) when the plugin has none.
  ModelCache create_cache(int64_t max_tokens);
  struct CachedOutput {
    at::Tensor hidden_out;  // every stage but the last
    at::Tensor logits;      // last stage: [rows, new, padded vocab / tp]
  };
  // New tokens input_ids [rows, new] continuing caches[row] (hidden_in from the previous stage
  // on a stage without the embedding, else undefined); extends the caches. cuda_graph: the plugin
  // may run a decoding step as a CUDA graph (ABI 1.9 triax_stage_io.cuda_graph).
  CachedOutput forward_cached(const std::vector<ModelCache*>& caches, const at::Tensor& input_ids,
                              const at::Tensor& hidden_in = {}, bool cuda_graph = false);

 private:
  void require_inference_cache() const;

  triax_model_ref model_;
  std::string name_;
};

}  // namespace triax
