// The model_config keys that Llama-style decoders share (nanotron's LlamaConfig and Qwen2Config,
// Hugging Face's LlamaConfig, MixtralConfig and Qwen2MoeConfig): token ids, sizes, grouped-query
// attention, RoPE, RMSNorm, embeddings. A model plugin's own config derives from DecoderConfig,
// reads these keys through it and adds its own; CausalLm's layout, the final norm, the decoder
// layer around the plugin's MLP and the tensor rules after the layers come with it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "triax/config_reader.hpp"
#include "triax/hf_mapping.hpp"
#include "triax/layers/rotary_embedding.hpp"

namespace triax {

struct AttentionShape;
struct CausalLmLayout;
struct ModelContext;
struct UnaryModule;
class PreNormDecoderLayer;

struct DecoderConfig {
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;
  std::optional<int64_t> pad_token_id;
  std::string hidden_act = "silu";
  int64_t hidden_size = 4096;
  double initializer_range = 0.02;
  int64_t intermediate_size = 11008;
  int64_t max_position_embeddings = 2048;
  int64_t num_attention_heads = 32;
  int64_t num_hidden_layers = 32;
  int64_t num_key_value_heads = 32;  // null (or absent) in the YAML means num_attention_heads
  double rms_norm_eps = 1e-6;
  std::optional<RopeScaling> rope_scaling;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  bool use_cache = true;
  int64_t vocab_size = 32000;
  bool attention_bias = false;
  // Whether attention_bias also puts a bias on o_proj: Llama's meaning (true); the Qwen2 family's
  // attention_bias is q, k and v only. Set by the plugin before reading.
  bool attention_bias_on_output = true;
  // nanotron's and transformers' choice of attention kernel: each accepted value runs causal
  // scaled_dot_product_attention.
  std::string attn_implementation = "sdpa";
  // nanotron's sliding_window_size: a query sees itself and the window - 1 keys before it
  // (flash-attention's window_size = (window - 1, 0)); null: the whole causal prefix.
  std::optional<int64_t> sliding_window_size;
  // nanotron's _use_doc_masking: attention stays inside the documents packed into a sample, and
  // rotary positions restart at each document (triax/layers/attention_mask.hpp).
  bool use_doc_masking = false;
  // read_position_keys: GPT-J rotary pairs; every no_rope_layer-th layer (1-based) without RoPE.
  bool rope_interleaved = false;
  std::optional<int64_t> no_rope_layer;
  // read_position_keys: z-loss on the LM logits (CausalLmLayout::z_loss_coefficient).
  bool z_loss_enabled = false;
  double z_loss_coefficient = 1e-4;

  // Qwen3's attention, set by the plugin before reading: an RMSNorm over each head's q and k before
  // RoPE (AttentionShape::qk_norm), and the model_config key head_dim, the features of each head
  // (default hidden_size / num_attention_heads; heads x head_dim need not be hidden_size).
  bool qk_norm = false;
  bool reads_head_dim = false;
  std::optional<int64_t> explicit_head_dim;  // head_dim as given; nullopt: hidden_size / num_attention_heads

  int64_t head_dim() const { return explicit_head_dim ? *explicit_head_dim : hidden_size / num_attention_heads; }
  int64_t q_features() const { return num_attention_heads * head_dim(); }
  int64_t kv_features() const { return num_key_value_heads * head_dim(); }
  // Set by the plugin: a tokens.sequence_length beyond max_position_embeddings extends the rotary
  // tables (nanotron's and Hugging Face's Qwen2 place any position) instead of being refused.
  bool sequence_may_exceed_max_positions = false;
  RopeOptions rope() const {
    return {head_dim(), rope_theta, max_position_embeddings, rope_scaling, sequence_may_exceed_max_positions};
  }
  // Pipeline blocks: embedding, one per decoder layer, final norm + lm_head + loss.
  int64_t num_blocks() const { return num_hidden_layers + 2; }

  // Reads the shared keys of `reader` (a model.model_config mapping); the current values are the
  // defaults, recorded into reader.resolved(). The plugin reads its own keys and calls
  // reader.finish().
  void read_decoder_keys(ConfigReader& reader);
  // The keys of position encoding, the LM z-loss and nanotron's implementation hints, which
  // nanotron's Qwen2Config has and any decoder may honour: rope_interleaved (or its older name
  // interleaved_rotary), no_rope_layer, z_loss_enabled, z_loss_coefficient, pretraining_tp,
  // _fused_rms_norm, _fused_rotary_emb, _use_qkv_packed, flex_attention_mask, log_attn_probs.
  // The resolved config records, under _implementation_hints, what each hint given does here.
  void read_position_keys(ConfigReader& reader);
  // Whether layer `layer` (0-based) rotates q and k: nanotron's rule, layer + 1 not a multiple of
  // no_rope_layer (SmolLM3's no_rope_layer_interval).
  bool uses_rope(int64_t layer) const { return !no_rope_layer || (layer + 1) % *no_rope_layer != 0; }
  bool output_bias() const { return attention_bias && attention_bias_on_output; }

  // The shared sizes are positive, the heads split hidden_size (or head_dim is given, positive and
  // even) and _attn_implementation is one that runs; otherwise a ConfigError naming the key.
  void check_decoder_shape(const ConfigReader& reader) const;
  // Before building: the rotary tables cover tokens.sequence_length (or may extend to it), and
  // the sliding window is no longer than it.
  void check_sequence_fits(const ConfigReader& reader, int64_t sequence_length) const;

  // A config.json's head_dim, when given, is the one this decoder builds (hidden_size /
  // num_attention_heads); otherwise a ConfigError naming it and `model_name`.
  void check_hf_head_dim(ConfigReader& config_json, const std::string& model_name) const;

  // CausalLm's layout of this decoder (Hugging Face's names), `model_name` prefixing its messages.
  CausalLmLayout causal_lm_layout(const std::string& model_name) const;
  // The final RMSNorm over hidden_size, as CausalLm runs it (a CausalLmNorm).
  UnaryModule final_norm(const ModelContext& context) const;
  // Decoder layer `layer`'s attention: its biases, whether it rotates and how.
  AttentionShape attention_shape(int64_t layer) const;
  // Decoder layer `layer` (0-based) of this shape, `mlp` its MLP (triax/layers/pre_norm_decoder_layer.hpp).
  std::shared_ptr<PreNormDecoderLayer> decoder_layer(UnaryModule mlp, const ModelContext& context,
                                                     int64_t layer) const;
  // Decoder layer attention's tensor rules in Hugging Face's names, `prefix` its module
  // ("model.layers.3.self_attn."): q_proj, k_proj, v_proj (fused, QkvLayout) with their biases,
  // o_proj and its bias, q_norm and k_norm, as this config has them.
  void add_hf_attention_rules(std::vector<HfTensorRule>& rules, const std::string& prefix) const;
  // The tensor rules after the layers, in Hugging Face's names: model.norm.weight, the head
  // (add_hf_head_rules), and the rotary frequencies older checkpoints carry per layer, skipped.
  void add_hf_final_rules(std::vector<HfTensorRule>& rules) const;
};

// How a config.json says which layers have a sliding window.
enum class HfWindowKeys {
  Mistral,   // Mistral, Mixtral: `sliding_window` on every layer (null: none)
  Qwen2,     // `use_sliding_window`, then `sliding_window` on the layers from `max_window_layers` on
  Qwen2Moe,  // `use_sliding_window` and `layer_types` (transformers' versions read max_window_layers differently)
  Qwen3Moe   // `use_sliding_window`, then `sliding_window` on every layer
};

// config.json's sliding window as nanotron's sliding_window_size, one window on every layer
// (nullopt: none). `layer_types`, where given, names each layer's attention. A window on some
// layers only is refused, naming the key.
std::optional<int64_t> sliding_window_from_hf(ConfigReader& config_json, HfWindowKeys keys);

// The config.json keys that hold the shared keys' values under the same names, for
// hf_keys_to_model_config and model_config_keys_to_hf.
const std::vector<HfConfigKey>& decoder_hf_keys();
// decoder_hf_keys() and the two that Qwen3's and Qwen3-MoE's config.json share with a model_config
// reading head_dim (DecoderConfig::reads_head_dim): head_dim, and attention_bias in their meaning
// (q, k, v and o_proj).
const std::vector<HfConfigKey>& qwen3_decoder_hf_keys();

}  // namespace triax
