// model.model_config of a Nemotron-H hybrid model, read strictly.
//
// The keys are Hugging Face's NemotronHConfig's, with its defaults, so that a config.json
// translates key for key. hybrid_override_pattern (also the marker that selects the plugin) gives
// each layer's kind by one letter (layer_kinds.hpp): M a Mamba-2 mixer, * attention, - an MLP,
// E a mixture of experts. Each layer is one residual block, out = x + mixer(RMSNorm(x)).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mamba2_mixer_config.hpp"
#include "moe_block_options.hpp"
#include "router_losses.hpp"
#include "triax/config_reader.hpp"

namespace triax::nemotron_h {

struct NemotronHConfig {
  std::string hybrid_override_pattern;  // one letter per layer, required
  int64_t num_hidden_layers = 0;        // the pattern's length when absent
  int64_t vocab_size = 131072;
  int64_t hidden_size = 4096;
  // Attention (*): grouped-query, no positions (no RoPE), no biases.
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 8;
  int64_t head_dim = 128;
  // MLP (-): down_proj(relu(up_proj(x))^2).
  int64_t intermediate_size = 21504;
  bool mlp_bias = false;
  // Mamba-2 (M): config.json's mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups,
  // conv_kernel, chunk_size, use_bias, use_conv_bias, time_step_{min,max,floor}; dt clamped below
  // at time_step_min (transformers' NemotronH mixer does so), no upper limit.
  mamba2::Mamba2MixerConfig mamba;
  // Mixture of experts (E), read only for a pattern with E: config.json's n_routed_experts,
  // num_experts_per_tok, moe_intermediate_size and moe_shared_expert_intermediate_size (required),
  // n_group, topk_group, norm_topk_prob, routed_scaling_factor (NemotronHMoE: sigmoid routing,
  // relu² experts, an ungated shared expert; moe_latent_size is refused), and triax's
  // router_aux_loss_coef, router_z_loss_coef and token_dispatcher_type.
  std::optional<moe::MoeBlockOptions> moe_block;
  moe::RouterLossCoefficients router_losses;
  double layer_norm_epsilon = 1e-5;  // the block norms, norm_f and the mixers' gated norms
  bool residual_in_fp32 = false;     // the residual stream between layers in fp32
  bool tie_word_embeddings = false;
  std::optional<int64_t> pad_token_id;
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;

  // Pipeline blocks: embedding, one per layer, final norm + lm_head + loss.
  int64_t num_blocks() const { return num_hidden_layers + 2; }
  char letter(int64_t layer) const { return hybrid_override_pattern.at(static_cast<size_t>(layer)); }
  int64_t layers_of(char letter) const;  // how many layers of the pattern are `letter`'s

  // Reads and validates every key of `reader` (a model.model_config mapping), then calls
  // reader.finish(): an unknown key, a wrong type or an impossible value (an unknown pattern
  // letter, a pattern whose length is not num_hidden_layers, groups that do not divide the Mamba
  // heads, chunk_size <= 0, E layers without the MoE keys, moe_latent_size) is a
  // ConfigError naming the key's path. Defaults are recorded into reader.resolved().
  static NemotronHConfig read(ConfigReader& reader);
};

// Forward FLOPs per token of each pipeline block at `sequence_length` (2 per multiply-add).
std::vector<double> nemotron_h_block_costs(const NemotronHConfig& config, int64_t sequence_length);

}  // namespace triax::nemotron_h
