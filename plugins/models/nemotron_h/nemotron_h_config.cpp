#include "nemotron_h_config.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "layer_kinds.hpp"
#include "triax/config_checks.hpp"

namespace triax::nemotron_h {
namespace {

std::string text(int64_t value) { return std::to_string(value); }

// Every letter of Hugging Face's NemotronH patterns: Mamba-2, attention, MLP, mixture of experts.
constexpr const char* kPatternLetters = "M*-E";

void read_mamba_keys(ConfigReader& reader, NemotronHConfig& c) {
  mamba2::Mamba2MixerConfig& m = c.mamba;
  m.chunk_size = 128;  // NemotronHConfig's default
  m.num_heads = reader.get<int64_t>("mamba_num_heads", m.num_heads);
  m.head_dim = reader.get<int64_t>("mamba_head_dim", m.head_dim);
  m.state_size = reader.get<int64_t>("ssm_state_size", m.state_size);
  m.n_groups = reader.get<int64_t>("n_groups", m.n_groups);
  m.conv_kernel = reader.get<int64_t>("conv_kernel", m.conv_kernel);
  m.chunk_size = reader.get<int64_t>("chunk_size", m.chunk_size);
  m.use_bias = reader.get<bool>("use_bias", m.use_bias);
  m.use_conv_bias = reader.get<bool>("use_conv_bias", m.use_conv_bias);
  m.time_step_min = reader.get<double>("time_step_min", m.time_step_min);
  m.time_step_max = reader.get<double>("time_step_max", m.time_step_max);
  m.time_step_floor = reader.get<double>("time_step_floor", m.time_step_floor);
  reader.choice("mamba_hidden_act", {"silu"}, "silu");  // the convolution's activation
  // transformers' NemotronH mixer clamps dt below at time_step_min (and not above).
  m.time_step_limit_low = m.time_step_min;
  m.hidden_size = c.hidden_size;
  m.layer_norm_epsilon = c.layer_norm_epsilon;
}

bool has_letter(const NemotronHConfig& c, char letter) {
  return c.hybrid_override_pattern.find(letter) != std::string::npos;
}

// MoeBlockOptions' fields by the config keys they come from (for check()'s refusals).
const std::map<std::string, std::string> kMoeKeyOfField = {
    {"num_experts", "n_routed_experts"},
    {"top_k", "num_experts_per_tok"},
    {"expert_intermediate_size", "moe_intermediate_size"},
    {"shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"},
    {"n_group", "n_group"},
    {"topk_group", "topk_group"},
    {"routed_scaling_factor", "routed_scaling_factor"}};

// The keys of the E layers (NemotronHMoE), only for a pattern with E: without one they are unknown.
void read_moe_keys(ConfigReader& reader, NemotronHConfig& c) {
  if (!has_letter(c, 'E')) return;
  if (const auto latent = reader.optional<int64_t>("moe_latent_size"))
    reader.fail("moe_latent_size", "is " + std::to_string(*latent) +
                                       ", but triax's E layers have no latent projection: leave it unset (null)");
  moe::MoeBlockOptions o;
  o.hidden_size = c.hidden_size;
  o.num_experts = reader.required<int64_t>("n_routed_experts");
  o.top_k = reader.required<int64_t>("num_experts_per_tok");
  o.expert_intermediate_size = reader.required<int64_t>("moe_intermediate_size");
  o.shared_expert_intermediate_size = reader.required<int64_t>("moe_shared_expert_intermediate_size");
  o.n_group = reader.get<int64_t>("n_group", o.n_group);
  o.topk_group = reader.get<int64_t>("topk_group", o.topk_group);
  o.norm_topk_prob = reader.get<bool>("norm_topk_prob", o.norm_topk_prob);
  o.routed_scaling_factor = reader.get<double>("routed_scaling_factor", o.routed_scaling_factor);
  o.score = moe::RouterScore::Sigmoid;
  o.activation = moe::ExpertActivation::SquaredRelu;  // mlp_hidden_act relu2, the only one read
  o.shared_expert = moe::SharedExpert::Ungated;
  o.dispatcher =
      moe::TokenDispatcher::kind_of(reader.choice("token_dispatcher_type", {"alltoall", "allgather"}, "alltoall"));
  c.router_losses.balance = reader.get<double>("router_aux_loss_coef", c.router_losses.balance);
  c.router_losses.z_loss = reader.get<double>("router_z_loss_coef", c.router_losses.z_loss);
  c.moe_block = o;
}

void read_keys(ConfigReader& reader, NemotronHConfig& c) {
  c.hybrid_override_pattern = reader.required<std::string>("hybrid_override_pattern");
  c.num_hidden_layers =
      reader.get<int64_t>("num_hidden_layers", static_cast<int64_t>(c.hybrid_override_pattern.size()));
  c.vocab_size = reader.get<int64_t>("vocab_size", c.vocab_size);
  c.hidden_size = reader.get<int64_t>("hidden_size", c.hidden_size);
  c.num_attention_heads = reader.get<int64_t>("num_attention_heads", c.num_attention_heads);
  c.num_key_value_heads = reader.get<int64_t>("num_key_value_heads", c.num_key_value_heads);
  c.head_dim = reader.get<int64_t>("head_dim", c.head_dim);
  c.intermediate_size = reader.get<int64_t>("intermediate_size", c.intermediate_size);
  c.mlp_bias = reader.get<bool>("mlp_bias", c.mlp_bias);
  reader.choice("mlp_hidden_act", {"relu2"}, "relu2");
  c.layer_norm_epsilon = reader.get<double>("layer_norm_epsilon", c.layer_norm_epsilon);
  c.residual_in_fp32 = reader.get<bool>("residual_in_fp32", c.residual_in_fp32);
  read_mamba_keys(reader, c);
  read_moe_keys(reader, c);
  c.tie_word_embeddings = reader.get<bool>("tie_word_embeddings", c.tie_word_embeddings);
  c.pad_token_id = reader.optional<int64_t>("pad_token_id");
  c.bos_token_id = reader.get<int64_t>("bos_token_id", c.bos_token_id);
  c.eos_token_id = reader.get<int64_t>("eos_token_id", c.eos_token_id);
  reader.finish();
}

// One letter per layer, each a kind this build has.
void check_pattern(const ConfigReader& reader, const NemotronHConfig& c) {
  const std::string& pattern = c.hybrid_override_pattern;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char letter = pattern[i];
    if (std::string(kPatternLetters).find(letter) == std::string::npos)
      reader.fail("hybrid_override_pattern",
                  std::string("unknown letter '") + letter + "' at layer " + text(i) +
                      " (the letters are M Mamba-2, * attention, - MLP, E mixture of experts)");
  }
  if (static_cast<int64_t>(pattern.size()) != c.num_hidden_layers)
    reader.fail("num_hidden_layers", "is " + text(c.num_hidden_layers) + ", but hybrid_override_pattern \"" + pattern +
                                         "\" has " + text(static_cast<int64_t>(pattern.size())) +
                                         " letters (one per layer)");
}

// The E layers' options, and their shared expert, which has no biases.
void check_moe(const ConfigReader& reader, const NemotronHConfig& c) {
  if (!c.moe_block) return;
  require_not_negative(reader, "router_aux_loss_coef", c.router_losses.balance);
  require_not_negative(reader, "router_z_loss_coef", c.router_losses.z_loss);
  c.moe_block->check(
      [&](const std::string& field, const std::string& why) { reader.fail(kMoeKeyOfField.at(field), why); });
  if (c.mlp_bias)
    reader.fail("mlp_bias", "is true, but the E layers' shared expert has no biases (triax's MoE block): set it false");
}

void check_sizes(const ConfigReader& reader, const NemotronHConfig& c) {
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"hidden_size", c.hidden_size},
                                   {"num_hidden_layers", c.num_hidden_layers},
                                   {"vocab_size", c.vocab_size},
                                   {"num_attention_heads", c.num_attention_heads},
                                   {"num_key_value_heads", c.num_key_value_heads},
                                   {"head_dim", c.head_dim},
                                   {"intermediate_size", c.intermediate_size},
                                   {"mamba_num_heads", c.mamba.num_heads},
                                   {"mamba_head_dim", c.mamba.head_dim},
                                   {"ssm_state_size", c.mamba.state_size},
                                   {"n_groups", c.mamba.n_groups},
                                   {"conv_kernel", c.mamba.conv_kernel},
                                   {"chunk_size", c.mamba.chunk_size}})
    require_positive(reader, key, value);
  require_positive(reader, "layer_norm_epsilon", c.layer_norm_epsilon);
  require_positive(reader, "time_step_min", c.mamba.time_step_min);
  if (c.mamba.time_step_max < c.mamba.time_step_min)
    reader.fail("time_step_max", "is " + std::to_string(c.mamba.time_step_max) + ", below time_step_min (" +
                                     std::to_string(c.mamba.time_step_min) + ")");
  if (c.mamba.num_heads % c.mamba.n_groups != 0)
    reader.fail("n_groups", text(c.mamba.n_groups) + " groups do not divide mamba_num_heads (" +
                                text(c.mamba.num_heads) + "): each group of heads shares one B and one C");
  if (has_letter(c, '*')) check_key_value_groups(reader, c.num_attention_heads, c.num_key_value_heads);
  check_moe(reader, c);
}

}  // namespace

NemotronHConfig NemotronHConfig::read(ConfigReader& reader) {
  NemotronHConfig c;
  read_keys(reader, c);
  check_sizes(reader, c);
  check_pattern(reader, c);
  double layers = 0.0;
  for (char letter : c.hybrid_override_pattern) layers += static_cast<double>(layer_kind(letter).parameter_count(c));
  check_parameter_count(reader, "hidden_size", static_cast<double>(c.vocab_size * c.hidden_size) * 2.0 + layers,
                        "vocab_size, hidden_size, hybrid_override_pattern and the layers' sizes");
  return c;
}

int64_t NemotronHConfig::layers_of(char letter) const {
  return static_cast<int64_t>(std::count(hybrid_override_pattern.begin(), hybrid_override_pattern.end(), letter));
}

std::vector<double> nemotron_h_block_costs(const NemotronHConfig& c, int64_t sequence_length) {
  std::vector<double> costs;
  costs.reserve(static_cast<size_t>(c.num_blocks()));
  costs.push_back(0.0);  // embedding lookup: no arithmetic
  for (char letter : c.hybrid_override_pattern)
    costs.push_back(2.0 * layer_kind(letter).multiply_adds_per_token(c, sequence_length));
  costs.push_back(2.0 * static_cast<double>(c.hidden_size) * static_cast<double>(c.vocab_size));  // lm_head
  return costs;
}

}  // namespace triax::nemotron_h
