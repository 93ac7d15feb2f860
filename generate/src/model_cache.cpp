#include "triax/generate/model_cache.hpp"

#include <cstddef>

#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {

ModelCache::ModelCache(ModelCache&& other) noexcept : model_(other.model_), handle_(other.handle_) {
  other.handle_ = nullptr;
}

ModelCache::~ModelCache() {
  if (handle_ != nullptr) model_.vtable->cache_destroy(model_.model, handle_);
}

int64_t ModelCache::length() const { return model_.vtable->cache_length(model_.model, handle_); }

CachedModel::CachedModel(const ModelInstance& model) : model_(model.ref()), name_(model.name()) {}

bool CachedModel::has_inference_cache() const {
  const triax_model_vtable& vtable = *model_.vtable;
  return vtable.struct_size >= offsetof(triax_model_vtable, forward_cached) + sizeof(vtable.forward_cached) &&
         vtable.cache_create != nullptr && vtable.cache_destroy != nullptr && vtable.cache_length != nullptr &&
         vtable.forward_cached != nullptr;
}

void CachedModel::require_inference_cache() const {
  if (!has_inference_cache())
    throw Error(TRIAX_ERROR_UNSUPPORTED, "model plugin '" + name_ + "' offers no inference cache (generation needs "
                                         "cache_create and forward_cached, ABI 1.3)");
}

ModelCache CachedModel::create_cache(int64_t max_tokens) {
  require_inference_cache();
  triax_error error{};
  triax_cache* handle = nullptr;
  triax_status status = model_.vtable->cache_create(model_.model, max_tokens, &handle, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name_ + "'");
  return ModelCache(model_, handle);
}

CachedModel::CachedOutput CachedModel::forward_cached(const std::vector<ModelCache*>& caches,
                                                      const at::Tensor& input_ids, const at::Tensor& hidden_in,
                                                      bool cuda_graph) {
  require_inference_cache();
  std::vector<triax_cache*> handles;
  handles.reserve(caches.size());
  for (const ModelCache* cache : caches) {
    if (cache->model_.model != model_.model)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "model plugin '" + name_ + "': a cache made by another model instance");
    handles.push_back(cache->handle_);
  }
  triax_stage_io io{};
  io.struct_size = sizeof(io);
  io.input_ids = borrow_handle(input_ids);
  io.hidden_in = borrow_handle(hidden_in);
  io.cuda_graph = cuda_graph ? 1 : 0;
  triax_error error{};
  triax_status status =
      model_.vtable->forward_cached(model_.model, handles.data(), static_cast<int32_t>(handles.size()), &io, &error);
  // Whatever the plugin handed over is ours, failure or not.
  CachedOutput out{adopt_handle(io.hidden_out), adopt_handle(io.logits)};
  adopt_handle(io.loss);
  adopt_handle(io.aux_loss);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name_ + "'");
  return out;
}

}  // namespace triax
