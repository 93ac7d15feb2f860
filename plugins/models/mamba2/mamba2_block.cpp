#include "mamba2_block.hpp"

#include <ATen/ATen.h>

namespace triax::mamba2 {

Mamba2Block::Mamba2Block(const Mamba2Config& config, const ModelContext& context)
    : residual_in_fp32_(config.residual_in_fp32), dtype_(context.dtype) {
  norm = register_module("norm", std::make_shared<RMSNorm>(config.hidden_size, config.layer_norm_epsilon,
                                                           context.device, context.dtype, TensorParallel::of(context)));
  mixer = register_module("mixer", std::make_shared<Mamba2Mixer>(config, context));
}

at::Tensor Mamba2Block::residual_of(const at::Tensor& x) const { return residual_in_fp32_ ? x.to(at::kFloat) : x; }

at::Tensor Mamba2Block::forward(const at::Tensor& x, const std::vector<at::Tensor>&) {
  return residual_of(x) + mixer->forward(norm->forward(x.to(dtype_)));
}

std::unique_ptr<LayerCache> Mamba2Block::create_cache(int64_t) { return std::make_unique<Mamba2LayerCache>(); }

at::Tensor Mamba2Block::forward_cached(const at::Tensor& x, const std::vector<at::Tensor>&, const CachedStep& step) {
  return residual_of(x) + mixer->forward_cached(norm->forward(x.to(dtype_)), step);
}

}  // namespace triax::mamba2
