// One Mamba layer (one pipeline block), Hugging Face's MambaBlock:
//   out = residual + mixer(norm(x in the model's dtype)), residual = x (in fp32 with
//   residual_in_fp32).
// The residual stream is the activation between layers: with residual_in_fp32 it is fp32 from
// the first layer's output on, and crosses pipeline stages in fp32 (a boundary carries its dtype);
// the mixer and the norms compute in the model's dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "mamba_config.hpp"
#include "mamba_mixer.hpp"
#include "triax/causal_lm.hpp"
#include "triax/layers/norm.hpp"
#include "triax/model.hpp"

namespace triax::mamba {

class MambaBlock : public CausalLmLayer {
 public:
  MambaBlock(const MambaConfig& config, const ModelContext& context);

  // x: [batch, seq, d_model] ([batch, seq/tp, d_model] in REDUCE_SCATTER mode); no shared inputs.
  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>& shared) override;
  std::unique_ptr<LayerCache> create_cache(int64_t capacity) override;
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>& shared,
                            const CachedStep& step) override;

  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<MambaMixer> mixer;

 private:
  at::Tensor residual_of(const at::Tensor& x) const;

  bool residual_in_fp32_;
  c10::ScalarType dtype_;
};

}  // namespace triax::mamba
