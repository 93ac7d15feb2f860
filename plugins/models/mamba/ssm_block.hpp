// One layer (one pipeline block) of Hugging Face's Mamba and Mamba-2 models (MambaBlock,
// Mamba2Block), around either mixer:
//   out = residual + mixer(norm(x in the model's dtype)), residual = x (in fp32 with
//   residual_in_fp32).
// The residual stream is the activation between layers: with residual_in_fp32 it is fp32 from
// the first layer's output on, and crosses pipeline stages in fp32 (a boundary carries its dtype);
// the mixer and the norm compute in the model's dtype. Generation: the mixer's states per
// sequence, in its own cache type.
//
// Mixer: constructed from (MixerConfig, ModelContext), with forward(hidden) and
// forward_cached(hidden, step) over [b, s, hidden] (s/tp in REDUCE_SCATTER mode); Cache: the
// LayerCache its forward_cached expects.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "triax/causal_lm.hpp"
#include "triax/layers/norm.hpp"
#include "triax/model.hpp"

namespace triax::mamba {

// The block's own settings: the norm before the mixer and the residual's dtype.
struct SsmBlockNorm {
  int64_t hidden_size;
  double eps;
  bool residual_in_fp32;
};

template <class Mixer, class Cache>
class SsmBlock : public CausalLmLayer {
 public:
  template <class MixerConfig>
  SsmBlock(const SsmBlockNorm& block, const MixerConfig& mixer_config, const ModelContext& context)
      : residual_in_fp32_(block.residual_in_fp32), dtype_(context.dtype) {
    // Registered in Hugging Face's order: norm, then mixer (the parameter table follows it).
    norm = register_module("norm", std::make_shared<RMSNorm>(block.hidden_size, block.eps, context.device,
                                                             context.dtype, TensorParallel::of(context)));
    mixer = register_module("mixer", std::make_shared<Mixer>(mixer_config, context));
  }

  // No shared inputs.
  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>&) override {
    return residual_of(x) + mixer->forward(norm->forward(x.to(dtype_)));
  }
  std::unique_ptr<LayerCache> create_cache(int64_t) override { return std::make_unique<Cache>(); }
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>&, const CachedStep& step) override {
    return residual_of(x) + mixer->forward_cached(norm->forward(x.to(dtype_)), step);
  }

  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Mixer> mixer;

 private:
  at::Tensor residual_of(const at::Tensor& x) const { return residual_in_fp32_ ? x.to(at::kFloat) : x; }

  bool residual_in_fp32_;
  c10::ScalarType dtype_;
};

}  // namespace triax::mamba
