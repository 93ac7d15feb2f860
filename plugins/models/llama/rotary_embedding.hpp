// Rotary position embeddings in the Hugging Face layout ("rotate half": the pair of feature i is
// feature i + head_dim/2), with optional linear or Llama-3 frequency scaling. The tables are
// applied by the SDK's fused op triax::apply_rotary (triax/layers/fused_ops.hpp).
//
// The cos/sin tables cover every position up to max_position_embeddings; they are computed once,
// in fp32, exactly as transformers computes them (same operations in the same order), and held
// as buffers, not parameters.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <utility>

#include "llama_config.hpp"

namespace triax::llama {

// Inverse frequencies [head_dim / 2], fp32, rope_scaling applied (transformers'
// _compute_default_rope_parameters / _compute_linear_scaling_rope_parameters /
// _compute_llama3_parameters).
at::Tensor rope_inverse_frequencies(const LlamaConfig& config);

class RotaryEmbedding : public torch::nn::Module {
 public:
  RotaryEmbedding(const LlamaConfig& config, c10::Device device);

  // cos and sin of positions 0..sequence_length-1, [sequence_length, head_dim], cast to dtype.
  std::pair<at::Tensor, at::Tensor> tables(int64_t sequence_length, c10::ScalarType dtype) const;

  int64_t max_positions() const { return cos_.size(0); }

 private:
  at::Tensor cos_, sin_;  // [max_position_embeddings, head_dim] fp32
};

}  // namespace triax::llama
