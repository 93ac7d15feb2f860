// DecoderConfig::read_position_keys: rotary layout, NoPE layers, the LM z-loss and nanotron's
// implementation hints (decoder_config.hpp).
#include <string>

#include "triax/decoder_config.hpp"

namespace triax {
namespace {

// A hint nanotron offers that selects an implementation: accepted at any value, and what it does
// here recorded for the resolved config.
void accept_hint(ConfigReader& reader, YAML::Node& hints, const char* key, const char* effect) {
  if (!reader.contains(key)) return;  // absent keys stay out of the resolved config
  reader.get<bool>(key, false);
  hints[key] = effect;
}

}  // namespace

void DecoderConfig::read_position_keys(ConfigReader& reader) {
  YAML::Node hints(YAML::NodeType::Map);
  if (reader.contains("_implementation_hints")) reader.ignore("_implementation_hints");  // recomputed below

  rope_interleaved = reader.get<bool>("rope_interleaved", rope_interleaved);
  // nanotron's Qwen2 attention reads the older name interleaved_rotary.
  if (reader.contains("interleaved_rotary")) {
    const bool older = *reader.optional<bool>("interleaved_rotary");
    if (reader.contains("rope_interleaved") && older != rope_interleaved)
      reader.fail("interleaved_rotary", std::string(older ? "true" : "false") + " disagrees with rope_interleaved " +
                                            (rope_interleaved ? "true" : "false") + "; give one of them");
    rope_interleaved = older;
    reader.resolved()["rope_interleaved"] = rope_interleaved;
    hints["interleaved_rotary"] = "honoured: the same as rope_interleaved";
  }

  no_rope_layer = reader.optional<int64_t>("no_rope_layer");
  if (no_rope_layer && *no_rope_layer <= 0)
    reader.fail("no_rope_layer", "must be a positive interval (every N-th layer, counting from 1, skips RoPE), got " +
                                     std::to_string(*no_rope_layer) + "; null: every layer uses RoPE");
  if (no_rope_layer && *no_rope_layer > num_hidden_layers)
    reader.fail("no_rope_layer", std::to_string(*no_rope_layer) + " is more than num_hidden_layers (" +
                                     std::to_string(num_hidden_layers) + "): no layer would skip RoPE; use null");

  z_loss_enabled = reader.get<bool>("z_loss_enabled", z_loss_enabled);
  z_loss_coefficient = reader.get<double>("z_loss_coefficient", z_loss_coefficient);
  if (!(z_loss_coefficient >= 0.0))
    reader.fail("z_loss_coefficient", "must not be negative, got " + std::to_string(z_loss_coefficient));

  accept_hint(reader, hints, "_fused_rms_norm", "no effect: RMSNorm is the SDK's fused kernel on CUDA either way");
  accept_hint(reader, hints, "_fused_rotary_emb", "no effect: rotary is the SDK's fused kernel on CUDA either way");
  accept_hint(reader, hints, "_use_qkv_packed", "no effect: q, k and v are always one packed projection");
  accept_hint(reader, hints, "log_attn_probs", "no effect: attention probabilities are not logged");
  // nanotron writes flex_attention_mask: null; the key stays out of the resolved config when absent.
  const YAML::Node mask = reader.raw("flex_attention_mask");
  if (!mask.IsDefined())
    reader.resolved().remove("flex_attention_mask");
  else if (!mask.IsNull())
    reader.fail("flex_attention_mask", "'" + (mask.IsScalar() ? mask.Scalar() : std::string("a mapping")) +
                                           "' is not implemented: attention is causal (leave it null)");
  else
    hints["flex_attention_mask"] = "honoured: null, plain causal attention";
  if (reader.contains("_attn_implementation"))
    hints["_attn_implementation"] = "no effect: every accepted value runs scaled_dot_product_attention";
  if (hints.size() > 0) reader.resolved()["_implementation_hints"] = hints;
}

}  // namespace triax
