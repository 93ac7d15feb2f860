// Rotary position embeddings in the Hugging Face layout ("rotate half": the pair of feature i is
// feature i + head_dim/2), with optional linear or Llama-3 frequency scaling, as Llama, Mistral,
// Qwen2 and their mixture-of-experts variants use them. The tables are applied by the SDK's fused
// op triax::apply_rotary (triax/layers/fused_ops.hpp).
//
// The cos/sin tables cover every position up to max_positions; they are computed once, in fp32,
// exactly as transformers computes them (same operations in the same order), and held as
// buffers, not parameters.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "triax/config_reader.hpp"

namespace triax {

// rope_scaling, Hugging Face style. `type` is "linear" or "llama3".
struct RopeScaling {
  std::string type;
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct RopeOptions {
  int64_t head_dim = 0;
  double theta = 10000.0;
  int64_t max_positions = 0;
  std::optional<RopeScaling> scaling;
  // Longer sequences extend the tables (as Hugging Face's Qwen2 and nanotron compute any
  // position) instead of being refused.
  bool extends = false;
};

// Reads the optional `rope_scaling` section of a model_config strictly (Hugging Face's
// `rope_type`, or the older `type`): nullopt when absent, null or "default". A ConfigError names
// the key of what is wrong or not implemented.
std::optional<RopeScaling> read_rope_scaling(ConfigReader& model_config);

// Inverse frequencies [head_dim / 2], fp32 on the CPU, scaling applied (transformers'
// _compute_default_rope_parameters / _compute_linear_scaling_rope_parameters /
// _compute_llama3_parameters).
at::Tensor rope_inverse_frequencies(const RopeOptions& options);

class RotaryEmbedding : public torch::nn::Module {
 public:
  RotaryEmbedding(const RopeOptions& options, c10::Device device);

  // cos and sin of positions 0..sequence_length-1, [sequence_length, head_dim], cast to dtype.
  // Beyond max_positions: extended once with options.extends, refused otherwise.
  std::pair<at::Tensor, at::Tensor> tables(int64_t sequence_length, c10::ScalarType dtype);

  int64_t max_positions() const { return cos_.size(0); }

 private:
  void compute(int64_t positions);  // cos_ and sin_ for 0..positions-1

  RopeOptions options_;
  at::Tensor cos_, sin_;  // [max_positions, head_dim] fp32
};

}  // namespace triax
