#include "mamba_block.hpp"

#include <ATen/ATen.h>

namespace triax::mamba {

MambaBlock::MambaBlock(const MambaConfig& config, const ModelContext& context)
    : residual_in_fp32_(config.residual_in_fp32), dtype_(context.dtype) {
  norm = register_module("norm", std::make_shared<RMSNorm>(config.d_model, config.rms_norm_eps, context.device,
                                                           context.dtype, TensorParallel::of(context)));
  mixer = register_module("mixer", std::make_shared<MambaMixer>(config, context));
}

at::Tensor MambaBlock::residual_of(const at::Tensor& x) const {
  return residual_in_fp32_ ? x.to(at::kFloat) : x;
}

at::Tensor MambaBlock::forward(const at::Tensor& x, const std::vector<at::Tensor>&) {
  return residual_of(x) + mixer->forward(norm->forward(x.to(dtype_)));
}

std::unique_ptr<LayerCache> MambaBlock::create_cache(int64_t) { return std::make_unique<MambaLayerCache>(); }

at::Tensor MambaBlock::forward_cached(const at::Tensor& x, const std::vector<at::Tensor>&, const CachedStep& step) {
  return residual_of(x) + mixer->forward_cached(norm->forward(x.to(dtype_)), step);
}

}  // namespace triax::mamba
