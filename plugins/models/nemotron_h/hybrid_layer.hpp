// One layer of a Nemotron-H model (one pipeline block), whatever its pattern letter:
//   out = residual + mixer(norm(x in the model's dtype)), residual = x (in fp32 with
//   residual_in_fp32),
// the norm an RMSNorm over hidden_size, the mixer the letter's (layer_kinds.hpp). Registered in
// Hugging Face's order: norm, then mixer. Generation: the mixer's own cache (conv and SSM state
// of a Mamba-2 layer, keys and values of an attention layer, nothing for an MLP or MoE layer).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "layer_kinds.hpp"
#include "nemotron_h_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/layers/norm.hpp"

namespace triax::nemotron_h {

class HybridLayer : public CausalLmLayer {
 public:
  HybridLayer(const NemotronHConfig& config, const LayerKind& kind, const ModelContext& context);

  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>& shared) override;  // no shared inputs
  std::unique_ptr<LayerCache> create_cache(int64_t capacity) override;
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& shared,
                            const CachedStep& step) override;

  std::shared_ptr<RMSNorm> norm;
  const std::shared_ptr<torch::nn::Module>& mixer() const { return mixer_.module; }

 private:
  at::Tensor residual_of(const at::Tensor& x) const { return residual_in_fp32_ ? x.to(at::kFloat) : x; }

  LayerMixer mixer_;
  bool residual_in_fp32_;
  c10::ScalarType dtype_;
};

}  // namespace triax::nemotron_h
