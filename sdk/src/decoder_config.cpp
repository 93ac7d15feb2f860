#include "triax/decoder_config.hpp"

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "triax/causal_lm.hpp"
#include "triax/config_checks.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/pre_norm_decoder_layer.hpp"

namespace triax {

void DecoderConfig::read_decoder_keys(ConfigReader& reader) {
  bos_token_id = reader.get<int64_t>("bos_token_id", bos_token_id);
  eos_token_id = reader.get<int64_t>("eos_token_id", eos_token_id);
  hidden_act = reader.choice("hidden_act", {"silu"}, hidden_act);
  hidden_size = reader.get<int64_t>("hidden_size", hidden_size);
  initializer_range = reader.get<double>("initializer_range", initializer_range);
  intermediate_size = reader.get<int64_t>("intermediate_size", intermediate_size);
  max_position_embeddings = reader.get<int64_t>("max_position_embeddings", max_position_embeddings);
  num_attention_heads = reader.get<int64_t>("num_attention_heads", num_attention_heads);
  num_hidden_layers = reader.get<int64_t>("num_hidden_layers", num_hidden_layers);
  attention_bias = reader.get<bool>("attention_bias", attention_bias);
  const std::optional<int64_t> kv_heads = reader.optional<int64_t>("num_key_value_heads");
  num_key_value_heads = kv_heads ? *kv_heads : num_attention_heads;
  reader.resolved()["num_key_value_heads"] = num_key_value_heads;
  pad_token_id = reader.optional<int64_t>("pad_token_id");
  rms_norm_eps = reader.get<double>("rms_norm_eps", rms_norm_eps);
  rope_scaling = read_rope_scaling(reader);
  rope_theta = reader.get<double>("rope_theta", rope_theta);
  tie_word_embeddings = reader.get<bool>("tie_word_embeddings", tie_word_embeddings);
  use_cache = reader.get<bool>("use_cache", use_cache);
  vocab_size = reader.get<int64_t>("vocab_size", vocab_size);
  attn_implementation = reader.get<std::string>("_attn_implementation", attn_implementation);
  sliding_window_size = reader.optional<int64_t>("sliding_window_size");
  use_doc_masking = reader.get<bool>("_use_doc_masking", use_doc_masking);
  if (reads_head_dim) {
    // Recorded as given or as the default it stands for (which check_decoder_shape then holds to the heads).
    explicit_head_dim = reader.optional<int64_t>("head_dim");
    reader.resolved()["head_dim"] =
        explicit_head_dim ? *explicit_head_dim : hidden_size / std::max<int64_t>(1, num_attention_heads);
  }
}

void DecoderConfig::check_decoder_shape(const ConfigReader& reader) const {
  require_positive(reader, "hidden_size", hidden_size);
  require_positive(reader, "intermediate_size", intermediate_size);
  require_positive(reader, "num_attention_heads", num_attention_heads);
  require_positive(reader, "num_key_value_heads", num_key_value_heads);
  require_positive(reader, "num_hidden_layers", num_hidden_layers);
  require_positive(reader, "vocab_size", vocab_size);
  require_positive(reader, "max_position_embeddings", max_position_embeddings);
  require_positive(reader, "rms_norm_eps", rms_norm_eps);
  require_positive(reader, "rope_theta", rope_theta);
  if (initializer_range < 0.0)
    reader.fail("initializer_range", "must not be negative, got " + std::to_string(initializer_range));
  if (explicit_head_dim)
    check_head_dim(reader, *explicit_head_dim, num_attention_heads, num_key_value_heads);
  else
    check_attention_shape(reader, hidden_size, num_attention_heads, num_key_value_heads);
  static const char* const kAttention[] = {"sdpa", "flash_attention_2", "flex_attention", "eager"};
  if (std::find(std::begin(kAttention), std::end(kAttention), attn_implementation) == std::end(kAttention))
    reader.fail("_attn_implementation",
                "'" + attn_implementation +
                    "' is not implemented (causal attention runs through scaled_dot_product_attention; "
                    "accepted: sdpa, flash_attention_2, flex_attention, eager)");
  if (sliding_window_size && *sliding_window_size < 1)
    reader.fail("sliding_window_size", "must be at least 1 (the keys a query sees, itself included; null: no window), "
                                       "got " + std::to_string(*sliding_window_size));
}

void DecoderConfig::check_sequence_fits(const ConfigReader& reader, int64_t sequence_length) const {
  if (sequence_length > max_position_embeddings && !sequence_may_exceed_max_positions)
    reader.fail("max_position_embeddings", "is " + std::to_string(max_position_embeddings) +
                                               ", shorter than tokens.sequence_length (" +
                                               std::to_string(sequence_length) + ")");
  // triax generate describes the blocks for a sequence of 1 (it has no training sequence): the
  // window is a training config's to check.
  if (sliding_window_size && sequence_length > 1 && *sliding_window_size > sequence_length)
    reader.fail("sliding_window_size", "is " + std::to_string(*sliding_window_size) +
                                           ", longer than tokens.sequence_length (" + std::to_string(sequence_length) +
                                           "): leave it null for attention over the whole sequence");
}

void DecoderConfig::check_hf_head_dim(ConfigReader& config_json, const std::string& model_name) const {
  if (std::optional<int64_t> given = config_json.optional<int64_t>("head_dim"); given && *given != head_dim())
    config_json.fail("head_dim", std::to_string(*given) + " is not supported: triax's " + model_name +
                                     " needs hidden_size / num_attention_heads = " + std::to_string(head_dim()));
}

CausalLmLayout DecoderConfig::causal_lm_layout(const std::string& model_name) const {
  CausalLmLayout layout;
  layout.model_name = model_name;
  layout.vocab_size = vocab_size;
  layout.hidden_size = hidden_size;
  layout.num_layers = num_hidden_layers;
  layout.tie_word_embeddings = tie_word_embeddings;
  layout.max_positions = max_position_embeddings;
  layout.attention = {sliding_window_size, use_doc_masking};
  if (z_loss_enabled) layout.z_loss_coefficient = z_loss_coefficient;
  return layout;
}

UnaryModule DecoderConfig::final_norm(const ModelContext& context) const {
  return UnaryModule::of(
      std::make_shared<RMSNorm>(hidden_size, rms_norm_eps, context.device, context.dtype, TensorParallel::of(context)));
}

AttentionShape DecoderConfig::attention_shape(int64_t layer) const {
  AttentionShape shape;
  shape.hidden_size = hidden_size;
  shape.heads = num_attention_heads;
  shape.kv_heads = num_key_value_heads;
  shape.qkv_bias = attention_bias;
  shape.output_bias = output_bias();
  shape.rotary = uses_rope(layer);
  shape.rope_interleaved = rope_interleaved;
  shape.sliding_window = sliding_window_size;
  shape.head_dim = explicit_head_dim.value_or(0);
  shape.qk_norm = qk_norm;
  shape.qk_norm_eps = rms_norm_eps;
  return shape;
}

std::shared_ptr<PreNormDecoderLayer> DecoderConfig::decoder_layer(UnaryModule mlp, const ModelContext& context,
                                                                  int64_t layer) const {
  return std::make_shared<PreNormDecoderLayer>(attention_shape(layer), rms_norm_eps, std::move(mlp), context);
}

void DecoderConfig::add_hf_attention_rules(std::vector<HfTensorRule>& rules, const std::string& prefix) const {
  const QkvLayout qkv{num_attention_heads, num_key_value_heads, head_dim()};
  rules.push_back(qkv.hf_rule(prefix, "weight", {hidden_size}));
  if (attention_bias) rules.push_back(qkv.hf_rule(prefix, "bias", {}));
  rules.push_back(HfTensorRule::rename(prefix + "o_proj.weight", {hidden_size, q_features()}));
  if (output_bias()) rules.push_back(HfTensorRule::rename(prefix + "o_proj.bias", {hidden_size}));
  if (qk_norm)
    for (const char* norm : {"q_norm.weight", "k_norm.weight"})
      rules.push_back(HfTensorRule::rename(prefix + norm, {head_dim()}));
}

void DecoderConfig::add_hf_final_rules(std::vector<HfTensorRule>& rules) const {
  rules.push_back(HfTensorRule::rename("model.norm.weight", {hidden_size}));
  add_hf_head_rules(rules, "model.embed_tokens.weight", {vocab_size, hidden_size}, tie_word_embeddings,
                    {"model.layers.*.self_attn.rotary_emb.inv_freq"});
}

std::optional<int64_t> sliding_window_from_hf(ConfigReader& config_json, HfWindowKeys keys) {
  const std::optional<int64_t> window = config_json.optional<int64_t>("sliding_window");
  if (keys == HfWindowKeys::Mistral) return window;
  if (!config_json.get<bool>("use_sliding_window", false)) return std::nullopt;
  auto on_every_layer = [&] {
    if (!window || *window < 1)
      config_json.fail("sliding_window", "must be a window of at least 1 token where the layers are windowed");
    return window;
  };
  if (keys == HfWindowKeys::Qwen3Moe) return on_every_layer();
  const int64_t layers = config_json.required<int64_t>("num_hidden_layers");
  if (const auto types = config_json.optional<std::vector<std::string>>("layer_types")) {
    const auto windowed = std::count(types->begin(), types->end(), "sliding_attention");
    if (windowed != 0 && windowed != static_cast<int64_t>(types->size()))
      config_json.fail("layer_types", "mixes sliding and full attention layers: triax windows every layer or none");
    if (windowed == 0) return std::nullopt;
  } else if (keys == HfWindowKeys::Qwen2Moe) {
    config_json.fail("use_sliding_window", "is true without layer_types: transformers' versions disagree on which "
                                           "layers max_window_layers windows; give layer_types");
  } else {
    const int64_t first_windowed = config_json.get<int64_t>("max_window_layers", 0);
    if (first_windowed >= layers) return std::nullopt;  // no layer reaches the window
    if (first_windowed > 0)
      config_json.fail("max_window_layers", std::to_string(first_windowed) +
                                                " windows only the later layers: triax windows every layer (0) or none");
  }
  return on_every_layer();
}

const std::vector<HfConfigKey>& decoder_hf_keys() {
  static const std::vector<HfConfigKey> keys = {
      {"bos_token_id", HfValue::TokenId},        {"eos_token_id", HfValue::TokenId},
      {"pad_token_id", HfValue::TokenId},        {"hidden_act", HfValue::String},
      {"hidden_size", HfValue::Integer},         {"initializer_range", HfValue::Number},
      {"intermediate_size", HfValue::Integer},   {"max_position_embeddings", HfValue::Integer},
      {"num_attention_heads", HfValue::Integer}, {"num_hidden_layers", HfValue::Integer},
      {"num_key_value_heads", HfValue::Integer}, {"rms_norm_eps", HfValue::Number},
      {"rope_theta", HfValue::Number},           {"tie_word_embeddings", HfValue::Boolean},
      {"use_cache", HfValue::Boolean},           {"vocab_size", HfValue::Integer}};
  return keys;
}

const std::vector<HfConfigKey>& qwen3_decoder_hf_keys() {
  static const std::vector<HfConfigKey> keys = [] {
    std::vector<HfConfigKey> all = decoder_hf_keys();
    all.push_back({"head_dim", HfValue::Integer});
    all.push_back({"attention_bias", HfValue::Boolean});
    return all;
  }();
  return keys;
}

}  // namespace triax
