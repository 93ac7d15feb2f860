#include "hybrid_layer.hpp"

#include <ATen/ATen.h>

namespace triax::nemotron_h {

HybridLayer::HybridLayer(const NemotronHConfig& config, const LayerKind& kind, const ModelContext& context)
    : residual_in_fp32_(config.residual_in_fp32), dtype_(context.dtype) {
  norm = register_module("norm", std::make_shared<RMSNorm>(config.hidden_size, config.layer_norm_epsilon,
                                                           context.device, context.dtype, TensorParallel::of(context)));
  mixer_ = kind.make(config, context);
  register_module("mixer", mixer_.module);
}

at::Tensor HybridLayer::forward(const at::Tensor& x, const std::vector<at::Tensor>&) {
  return residual_of(x) + mixer_.forward(norm->forward(x.to(dtype_)));
}

std::unique_ptr<LayerCache> HybridLayer::create_cache(int64_t capacity) { return mixer_.create_cache(capacity); }

at::Tensor HybridLayer::forward_cached(const at::Tensor& x, const std::vector<at::Tensor>&, const CachedStep& step) {
  return residual_of(x) + mixer_.forward_cached(norm->forward(x.to(dtype_)), step);
}

}  // namespace triax::nemotron_h
