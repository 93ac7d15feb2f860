// model.model_config of a Mamba-2 model, read strictly.
//
// The keys are Hugging Face's Mamba2Config's, with its defaults, so that a config.json translates
// key for key, plus the marker is_mamba2_config. The mixer's width is num_heads x head_dim, which
// must equal expand x hidden_size; B and C are shared by n_groups groups of heads.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "triax/config_reader.hpp"

namespace triax::mamba2 {

struct Mamba2Config {
  int64_t hidden_size = 4096;
  int64_t num_hidden_layers = 64;
  int64_t vocab_size = 32768;
  int64_t num_heads = 128;
  int64_t head_dim = 64;
  int64_t state_size = 128;
  int64_t n_groups = 8;
  int64_t expand = 2;
  int64_t conv_kernel = 4;
  int64_t chunk_size = 256;
  bool use_bias = false;       // in_proj and out_proj biases
  bool use_conv_bias = true;
  double layer_norm_epsilon = 1e-5;  // the block norms, the final norm and the mixer's gated norm
  bool residual_in_fp32 = true;
  double time_step_min = 0.001;  // dt_bias initialisation: softplus(dt_bias) in [min, max]
  double time_step_max = 0.1;
  double time_step_floor = 1e-4;
  // time_step_limit: dt clamped to [low, high] after the softplus. The key null (the default):
  // Hugging Face's (0, inf), no clamp.
  double time_step_limit_low = 0.0;
  double time_step_limit_high = std::numeric_limits<double>::infinity();
  bool tie_word_embeddings = false;
  std::optional<int64_t> pad_token_id;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 2;

  int64_t d_inner() const { return num_heads * head_dim; }
  // The channels the causal convolution runs over: x, B and C.
  int64_t conv_dim() const { return d_inner() + 2 * n_groups * state_size; }
  // in_proj's output features: z, then x, B, C, then dt.
  int64_t projection_size() const { return d_inner() + conv_dim() + num_heads; }
  // Per group of heads (the unit tensor parallelism splits): its heads' channels, its share of
  // the convolution's channels (x, then its B and C) and of in_proj's rows (z, x, B, C, dt).
  int64_t heads_per_group() const { return num_heads / n_groups; }
  int64_t group_channels() const { return heads_per_group() * head_dim; }
  int64_t group_conv_dim() const { return group_channels() + 2 * state_size; }
  int64_t group_projection_size() const { return group_channels() + group_conv_dim() + heads_per_group(); }
  // Pipeline blocks: embedding, one per layer, final norm + lm_head + loss.
  int64_t num_blocks() const { return num_hidden_layers + 2; }

  // Reads and validates every key of `reader` (a model.model_config mapping), then calls
  // reader.finish(): an unknown key, a wrong type or an impossible value is a ConfigError naming
  // the key's path. Defaults are recorded into reader.resolved().
  static Mamba2Config read(ConfigReader& reader);
};

// Forward FLOPs per token of each pipeline block at `sequence_length` (2 per multiply-add).
std::vector<double> mamba2_block_costs(const Mamba2Config& config, int64_t sequence_length);

}  // namespace triax::mamba2
