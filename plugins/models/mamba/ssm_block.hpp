// One layer (one pipeline block) of Hugging Face's Mamba and Mamba-2 models (MambaBlock,
// Mamba2Block), around either mixer:
//   out = residual + mixer(norm(x in the model's dtype)), residual = x (in fp32 with
//   residual_in_fp32).
// The residual stream is the activation between layers: with residual_in_fp32 it is fp32 from
// the first layer's output on, and crosses pipeline stages in fp32 (a boundary carries its dtype);
// the mixer and the norm compute in the model's dtype. Generation: the mixer's states per
// sequence, in its own cache type; the residual add left to the next layer's norm kernel.
// Training with an fp32 residual and a 16-bit model (unless TRIAX_MAMBA_BLOCK_NORM_FUSED=0;
// +2.1% on the Mamba-2 780m and the Mamba-1.4b steps on an H100): the norm reads the fp32
// residual itself and its backward writes the residual's gradient in fp32, the residual stream's
// gradient already added (rms_norm_of_fp32_residual): no cast either way and no separate sum of
// the two gradients; the residual add by 16-byte vectors (add_to_fp32_residual). The same bits.
//
// Mixer: constructed from (MixerConfig, ModelContext), with forward(hidden) and
// forward_cached(hidden, step) over [b, s, hidden] (s/tp in REDUCE_SCATTER mode); Cache: the
// LayerCache its forward_cached expects.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "triax/causal_lm.hpp"
#include "triax/environment_switch.hpp"
#include "triax/layers/fp32_residual_add.hpp"
#include "triax/layers/fp32_residual_norm.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"
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
      : residual_in_fp32_(block.residual_in_fp32),
        add_norm_(switched_on_unless_zero("TRIAX_MAMBA_ADD_NORM")),
        norm_fused_(switched_on_unless_zero("TRIAX_MAMBA_BLOCK_NORM_FUSED")),
        dtype_(context.dtype),
        tp_(TensorParallel::of(context)) {
    // Registered in Hugging Face's order: norm, then mixer (the parameter table follows it).
    norm = register_module("norm",
                           std::make_shared<RMSNorm>(block.hidden_size, block.eps, context.device, context.dtype, tp_));
    mixer = register_module("mixer", std::make_shared<Mixer>(mixer_config, context));
  }

  // No shared inputs.
  at::Tensor forward(const at::Tensor& x, const std::vector<at::Tensor>&) override {
    if (norm_fused_ && residual_in_fp32_ && x.scalar_type() == at::kFloat && dtype_ != at::kFloat &&
        norm->amax_recording() == AmaxRecording::None) {
      auto [residual, normed] =
          rms_norm_of_fp32_residual(x, replicated_on_sequence_shard(norm->weight, tp_), norm->eps());
      return add_to_fp32_residual(residual, mixer->forward(normed));
    }
    return residual_of(x) + mixer->forward(norm->forward(x.to(dtype_)));
  }
  std::unique_ptr<LayerCache> create_cache(int64_t) override { return std::make_unique<Cache>(); }
  at::Tensor forward_cached(const at::Tensor& x, const std::vector<at::Tensor>&, const CachedStep& step) override {
    return residual_of(x) + mixer->forward_cached(norm->forward(x.to(dtype_)), step);
  }

  // Inference: the mixer's output left pending, added by the next layer's norm (or CausalLm's
  // end), whose one kernel adds, casts and normalises: a decoding step's residual add, cast and
  // norm in one launch (TRIAX_MAMBA_ADD_NORM=0: three, as forward_cached).
  ResidualStream forward_cached_stream(const ResidualStream& stream, const std::vector<at::Tensor>& shared,
                                       const CachedStep& step) override {
    if (!add_norm_) return CausalLmLayer::forward_cached_stream(stream, shared, step);
    auto [residual, normed] = normed_stream(stream);
    return {residual, mixer->forward_cached(normed, step)};
  }

  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Mixer> mixer;

 private:
  at::Tensor residual_of(const at::Tensor& x) const { return residual_in_fp32_ ? x.to(at::kFloat) : x; }
  // {the residual, the norm's output}: forward_cached's, with a pending add done in the norm's kernel.
  std::pair<at::Tensor, at::Tensor> normed_stream(const ResidualStream& stream) {
    if (!stream.pending.defined()) return {residual_of(stream.residual), norm->forward(stream.residual.to(dtype_))};
    if (residual_in_fp32_) {  // residual_of: an fp64 model's sum back to fp32, as forward_cached does
      auto [sum, normed] = add_rms_norm_fp32_residual(stream.residual, stream.pending, norm->weight, norm->eps());
      return {residual_of(sum), normed};
    }
    return norm->forward_after_add(stream.residual, stream.pending);
  }

  bool residual_in_fp32_;
  bool add_norm_;    // TRIAX_MAMBA_ADD_NORM (default on), read at construction
  bool norm_fused_;  // TRIAX_MAMBA_BLOCK_NORM_FUSED (default on), read at construction
  c10::ScalarType dtype_;
  TensorParallel tp_;  // the norm weight's gradient summed over tp in REDUCE_SCATTER mode (RMSNorm's)
};

}  // namespace triax::mamba
