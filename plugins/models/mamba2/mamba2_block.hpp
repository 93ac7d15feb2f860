// One Mamba-2 layer (one pipeline block), Hugging Face's Mamba2Block:
//   out = residual + mixer(norm(x in the model's dtype)), residual = x (in fp32 with
//   residual_in_fp32, which then also crosses pipeline stages in fp32).
// Generation: the mixer's conv and SSM states per sequence (Mamba2LayerCache).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "mamba2_config.hpp"
#include "mamba2_mixer.hpp"
#include "triax/causal_lm.hpp"
#include "triax/layers/norm.hpp"
#include "triax/model.hpp"

namespace triax::mamba2 {

class Mamba2Block : public CausalLmLayer {
 public:
  Mamba2Block(const Mamba2Config& config, const ModelContext& context);

  // x: [batch, seq, hidden_size]; no shared inputs.
  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>& shared) override;
  std::unique_ptr<LayerCache> create_cache(int64_t capacity) override;
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& shared,
                            const CachedStep& step) override;

  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Mamba2Mixer> mixer;

 private:
  at::Tensor residual_of(const at::Tensor& x) const;

  bool residual_in_fp32_;
  c10::ScalarType dtype_;
};

}  // namespace triax::mamba2
