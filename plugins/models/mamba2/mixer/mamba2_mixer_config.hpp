// The shape and settings of one Mamba-2 mixer (mamba2_mixer.hpp), whichever model holds it: the
// mamba2 plugin's Mamba2Config extends it with Mamba2ForCausalLM's keys, the nemotron_h plugin
// fills it from NemotronHForCausalLM's. The defaults are Hugging Face's Mamba2Config's.
#pragma once

#include <cstdint>
#include <limits>

namespace triax::mamba2 {

struct Mamba2MixerConfig {
  int64_t hidden_size = 4096;
  int64_t num_heads = 128;
  int64_t head_dim = 64;
  int64_t state_size = 128;
  int64_t n_groups = 8;
  int64_t conv_kernel = 4;
  int64_t chunk_size = 256;
  bool use_bias = false;  // in_proj and out_proj biases
  bool use_conv_bias = true;
  double layer_norm_epsilon = 1e-5;  // the gated norm's (and the mamba2 model's block norms')
  double time_step_min = 0.001;      // dt_bias initialisation: softplus(dt_bias) in [min, max]
  double time_step_max = 0.1;
  double time_step_floor = 1e-4;
  // dt clamped to [low, high] after the softplus; (0, inf): no clamp.
  double time_step_limit_low = 0.0;
  double time_step_limit_high = std::numeric_limits<double>::infinity();

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
  // Parameters of one mixer.
  int64_t parameter_count() const {
    int64_t count = conv_dim() * conv_kernel + (use_conv_bias ? conv_dim() : 0)  // conv1d
                    + projection_size() * hidden_size                            // in_proj
                    + 3 * num_heads                                              // dt_bias, A_log, D
                    + d_inner()                                                  // the gated norm
                    + hidden_size * d_inner();                                   // out_proj
    return use_bias ? count + projection_size() + hidden_size : count;
  }
  // Forward multiply-adds per token at chunks of min(chunk_size, sequence_length) positions.
  double multiply_adds_per_token(int64_t sequence_length) const;
};

}  // namespace triax::mamba2
