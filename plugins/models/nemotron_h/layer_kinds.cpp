#include "layer_kinds.hpp"

#include <ATen/ATen.h>

#include <string>

#include "mamba2_mixer.hpp"
#include "mamba2_mixer_hf.hpp"
#include "mamba2_mixer_init.hpp"
#include "moe_block.hpp"
#include "moe_block_hf.hpp"
#include "pytorch_default_init.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/key_value_cache.hpp"
#include "triax/layers/ungated_mlp.hpp"

namespace triax::nemotron_h {
namespace {

using mamba::ends_with;

void require_divisible(ConfigReader& reader, const char* key, int64_t value, int tp_size, const std::string& why) {
  if (value % tp_size != 0)
    reader.fail(key, std::to_string(value) + " is not divisible by the tensor parallel size " +
                         std::to_string(tp_size) + " (" + why + ")");
}

// M: the shared Mamba-2 mixer.
LayerKind mamba2_kind() {
  LayerKind kind;
  kind.letter = 'M';
  kind.make = [](const NemotronHConfig& c, const ModelContext& context) {
    auto mixer = std::make_shared<mamba2::Mamba2Mixer>(c.mamba, context);
    mamba2::Mamba2Mixer* raw = mixer.get();
    return LayerMixer{mixer, [raw](const at::Tensor& x) { return raw->forward(x); },
                      [](int64_t) { return std::make_unique<mamba2::Mamba2LayerCache>(); },
                      [raw](const at::Tensor& x, const CachedStep& step) { return raw->forward_cached(x, step); }};
  };
  kind.add_hf_rules = [](const NemotronHConfig& c, std::vector<HfTensorRule>& rules, const std::string& prefix) {
    mamba2::add_mamba2_mixer_rules(c.mamba, rules, prefix);
  };
  kind.multiply_adds_per_token = [](const NemotronHConfig& c, int64_t s) { return c.mamba.multiply_adds_per_token(s); };
  kind.parameter_count = [](const NemotronHConfig& c) { return c.mamba.parameter_count(); };
  kind.init_parameter = [](const NamedParameter& p, const NemotronHConfig& c, const LayerInit& init) {
    return mamba2::init_mamba2_mixer_parameter(p, c.mamba, init.initializer_range, init.out_proj_scale, init.seed);
  };
  kind.check_tensor_parallel = [](ConfigReader& reader, const NemotronHConfig& c, const ModelContext& context) {
    mamba2::Mamba2Mixer::check_tensor_parallel(reader, c.mamba, context);
  };
  return kind;
}

AttentionShape attention_shape(const NemotronHConfig& c) {
  AttentionShape shape;
  shape.hidden_size = c.hidden_size;
  shape.heads = c.num_attention_heads;
  shape.kv_heads = c.num_key_value_heads;
  shape.head_dim = c.head_dim;
  shape.rotary = false;  // NemotronH's attention has no positions
  return shape;
}

// *: the SDK's grouped-query attention without rotary embeddings or biases.
LayerKind attention_kind() {
  LayerKind kind;
  kind.letter = '*';
  kind.make = [](const NemotronHConfig& c, const ModelContext& context) {
    auto attention = std::make_shared<GroupedQueryAttention>(attention_shape(c), context);
    GroupedQueryAttention* raw = attention.get();
    return LayerMixer{attention, [raw](const at::Tensor& x) { return raw->forward(x, at::Tensor(), at::Tensor()); },
                      [](int64_t capacity) { return std::make_unique<KeyValueCache>(capacity); },
                      [raw](const at::Tensor& x, const CachedStep& step) {
                        return raw->forward_cached(x, at::Tensor(), at::Tensor(), step);
                      }};
  };
  kind.add_hf_rules = [](const NemotronHConfig& c, std::vector<HfTensorRule>& rules, const std::string& prefix) {
    rules.push_back(QkvLayout::of(attention_shape(c)).hf_rule(prefix, "weight", {c.hidden_size}));
    rules.push_back(
        HfTensorRule::rename(prefix + "o_proj.weight", {c.hidden_size, c.num_attention_heads * c.head_dim}));
  };
  // q, k, v and o; the scores and their weighted sum over the whole sequence (no causal discount).
  kind.multiply_adds_per_token = [](const NemotronHConfig& c, int64_t s) {
    const double h = static_cast<double>(c.hidden_size), d = static_cast<double>(c.head_dim);
    const double q = static_cast<double>(c.num_attention_heads) * d,
                 kv = static_cast<double>(c.num_key_value_heads) * d;
    return h * (q + 2.0 * kv) + q * h + 2.0 * q * static_cast<double>(s);
  };
  kind.parameter_count = [](const NemotronHConfig& c) {
    return c.hidden_size * (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim +
           c.num_attention_heads * c.head_dim * c.hidden_size;
  };
  kind.init_parameter = [](const NamedParameter& p, const NemotronHConfig&, const LayerInit& init) {
    if (!ends_with(p.name, "qkv_proj.weight") && !ends_with(p.name, "o_proj.weight")) return false;
    init_normal(p, init.initializer_range, init.seed);
    return true;
  };
  kind.check_tensor_parallel = [](ConfigReader& reader, const NemotronHConfig& c, const ModelContext& context) {
    require_divisible(reader, "num_attention_heads", c.num_attention_heads, context.tp_size,
                      "a rank holds whole heads");
    require_divisible(reader, "num_key_value_heads", c.num_key_value_heads, context.tp_size,
                      "a rank holds whole heads");
  };
  return kind;
}

// -: the SDK's ungated MLP with relu².
LayerKind mlp_kind() {
  LayerKind kind;
  kind.letter = '-';
  kind.make = [](const NemotronHConfig& c, const ModelContext& context) {
    auto mlp = std::make_shared<UngatedMlp>(c.hidden_size, c.intermediate_size,
                                            UngatedMlpOptions::relu_squared(c.mlp_bias), context);
    UngatedMlp* raw = mlp.get();
    return LayerMixer{mlp, [raw](const at::Tensor& x) { return raw->forward(x); },
                      [](int64_t) { return std::make_unique<LayerCache>(); },  // keeps nothing
                      [raw](const at::Tensor& x, const CachedStep&) { return raw->forward(x); }};
  };
  kind.add_hf_rules = [](const NemotronHConfig& c, std::vector<HfTensorRule>& rules, const std::string& prefix) {
    const int64_t h = c.hidden_size, f = c.intermediate_size;
    rules.push_back(HfTensorRule::rename(prefix + "up_proj.weight", {f, h}));
    if (c.mlp_bias) rules.push_back(HfTensorRule::rename(prefix + "up_proj.bias", {f}));
    rules.push_back(HfTensorRule::rename(prefix + "down_proj.weight", {h, f}));
    if (c.mlp_bias) rules.push_back(HfTensorRule::rename(prefix + "down_proj.bias", {h}));
  };
  kind.multiply_adds_per_token = [](const NemotronHConfig& c, int64_t) {
    return 2.0 * static_cast<double>(c.hidden_size) * static_cast<double>(c.intermediate_size);
  };
  kind.parameter_count = [](const NemotronHConfig& c) {
    return 2 * c.hidden_size * c.intermediate_size + (c.mlp_bias ? c.intermediate_size + c.hidden_size : 0);
  };
  kind.init_parameter = [](const NamedParameter& p, const NemotronHConfig&, const LayerInit& init) {
    if (ends_with(p.name, "up_proj.weight") || ends_with(p.name, "down_proj.weight")) {
      init_normal(p, init.initializer_range, init.seed);
    } else if (ends_with(p.name, "up_proj.bias") || ends_with(p.name, "down_proj.bias")) {
      init_constant(p, 0.0);
    } else {
      return false;
    }
    return true;
  };
  kind.check_tensor_parallel = [](ConfigReader& reader, const NemotronHConfig& c, const ModelContext& context) {
    require_divisible(reader, "intermediate_size", c.intermediate_size, context.tp_size,
                      "up_proj is split by its output features");
  };
  return kind;
}

// E: the shared MoE block with NemotronHMoE's options (sigmoid routing, relu² experts, an ungated
// shared expert). Initialised as transformers does: router and every projection ~ N(0,
// initializer_range), e_score_correction_bias 0.
LayerKind moe_kind() {
  LayerKind kind;
  kind.letter = 'E';
  kind.make = [](const NemotronHConfig& c, const ModelContext& context) {
    auto block = std::make_shared<moe::MoeBlock>(*c.moe_block, context);
    moe::MoeBlock* raw = block.get();
    return LayerMixer{block, [raw](const at::Tensor& x) { return raw->forward(x); },
                      [](int64_t) { return std::make_unique<LayerCache>(); },  // keeps nothing
                      [raw](const at::Tensor& x, const CachedStep&) { return raw->forward(x); }};
  };
  kind.add_hf_rules = [](const NemotronHConfig& c, std::vector<HfTensorRule>& rules, const std::string& prefix) {
    for (HfTensorRule& rule : moe::moe_block_hf_rules(*c.moe_block, prefix, prefix, moe::MoeHfNames::nemotron_h()))
      rules.push_back(std::move(rule));
  };
  kind.multiply_adds_per_token = [](const NemotronHConfig& c, int64_t) {
    return c.moe_block->multiply_adds_per_token();
  };
  kind.parameter_count = [](const NemotronHConfig& c) { return c.moe_block->parameter_count(); };
  kind.init_parameter = [](const NamedParameter& p, const NemotronHConfig&, const LayerInit& init) {
    if (ends_with(p.name, "e_score_correction.bias")) {
      init_constant(p, 0.0);
    } else if (ends_with(p.name, "gate.weight") || ends_with(p.name, "up_proj") || ends_with(p.name, "down_proj") ||
               ends_with(p.name, "up_proj.weight") || ends_with(p.name, "down_proj.weight")) {
      init_normal(p, init.initializer_range, init.seed);
    } else {
      return false;
    }
    return true;
  };
  kind.check_tensor_parallel = [](ConfigReader& reader, const NemotronHConfig& c, const ModelContext& context) {
    require_divisible(reader, "moe_shared_expert_intermediate_size", c.moe_block->shared_expert_intermediate_size,
                      context.tp_size, "the shared expert's up_proj is split by its output features");
    if (c.moe_block->num_experts % context.ep_size != 0)
      reader.fail("n_routed_experts", std::to_string(c.moe_block->num_experts) +
                                          " is not divisible by parallelism.expert_parallel_size (" +
                                          std::to_string(context.ep_size) + "): each ep rank holds as many experts");
  };
  return kind;
}

}  // namespace

const LayerKind& layer_kind(char letter) {
  static const std::vector<LayerKind> kinds = {mamba2_kind(), attention_kind(), mlp_kind(), moe_kind()};
  for (const LayerKind& kind : kinds)
    if (kind.letter == letter) return kind;
  throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string("nemotron_h: no layer kind for the letter '") + letter + "'");
}

}  // namespace triax::nemotron_h
