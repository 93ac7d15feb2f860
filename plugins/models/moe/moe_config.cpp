#include "moe_config.hpp"

#include <triax/config_checks.hpp>

#include <algorithm>

namespace triax::moe {
namespace {

MoeSettings read_moe_settings(ConfigReader& r, int64_t intermediate_size, int64_t num_layers) {
  MoeSettings m;
  m.num_experts = r.get<int64_t>("num_experts", m.num_experts);
  m.top_k = r.get<int64_t>("top_k", m.top_k);
  m.layers = r.get<std::vector<int64_t>>("layers", m.layers);
  m.moe_intermediate_size = r.get<int64_t>("moe_intermediate_size", intermediate_size);
  m.shared_expert_intermediate_size = r.get<int64_t>("shared_expert_intermediate_size", intermediate_size);
  m.enable_shared_expert = r.get<bool>("enable_shared_expert", m.enable_shared_expert);
  m.norm_topk_prob = r.get<bool>("norm_topk_prob", m.norm_topk_prob);
  m.router_aux_loss_coef = r.get<double>("router_aux_loss_coef", m.router_aux_loss_coef);
  m.router_z_loss_coef = r.get<double>("router_z_loss_coef", m.router_z_loss_coef);
  m.token_dispatcher_type = r.get<std::string>("token_dispatcher_type", m.token_dispatcher_type);
  r.finish();

  require_positive(r, "num_experts", m.num_experts);
  require_positive(r, "top_k", m.top_k);
  if (m.top_k > m.num_experts)
    r.fail("top_k", std::to_string(m.top_k) + " is larger than num_experts (" + std::to_string(m.num_experts) +
                        "): a token cannot be routed to more experts than there are");
  require_positive(r, "moe_intermediate_size", m.moe_intermediate_size);
  require_positive(r, "shared_expert_intermediate_size", m.shared_expert_intermediate_size);
  require_not_negative(r, "router_aux_loss_coef", m.router_aux_loss_coef);
  require_not_negative(r, "router_z_loss_coef", m.router_z_loss_coef);
  if (m.token_dispatcher_type != "alltoall" && m.token_dispatcher_type != "allgather")
    r.fail("token_dispatcher_type", "expected one of: alltoall, allgather; got '" + m.token_dispatcher_type + "'");
  const bool every_layer = m.layers.size() == 1 && m.layers[0] == -1;
  if (!every_layer) {
    std::vector<int64_t> sorted = m.layers;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted[i] < 0 || sorted[i] >= num_layers)
        r.fail("layers", "layer " + std::to_string(sorted[i]) + " is outside 0.." + std::to_string(num_layers - 1) +
                             " (num_hidden_layers " + std::to_string(num_layers) + "); [-1] means every layer");
      if (i > 0 && sorted[i] == sorted[i - 1]) r.fail("layers", "layer " + std::to_string(sorted[i]) + " is listed twice");
    }
  }
  return m;
}

}  // namespace

bool MoeConfig::is_moe_layer(int64_t layer) const {
  if (moe.layers.size() == 1 && moe.layers[0] == -1) return true;
  return std::find(moe.layers.begin(), moe.layers.end(), layer) != moe.layers.end();
}

MoeBlockOptions MoeConfig::block_options() const {
  MoeBlockOptions o;
  o.hidden_size = hidden_size;
  o.num_experts = moe.num_experts;
  o.top_k = moe.top_k;
  o.expert_intermediate_size = moe.moe_intermediate_size;
  o.norm_topk_prob = moe.norm_topk_prob;
  o.shared_expert = moe.enable_shared_expert ? SharedExpert::Gated : SharedExpert::None;
  o.shared_expert_intermediate_size = moe.shared_expert_intermediate_size;
  o.dispatcher = TokenDispatcher::kind_of(moe.token_dispatcher_type);
  return o;
}

int64_t MoeConfig::moe_layer_count() const {
  int64_t count = 0;
  for (int64_t i = 0; i < num_hidden_layers; ++i) count += is_moe_layer(i) ? 1 : 0;
  return count;
}

MoeConfig MoeConfig::read(ConfigReader& reader, const MoeFamily& family) {
  MoeConfig c;
  // nanotron's Qwen2Config and Qwen2-MoE: biases on q, k and v only; Qwen3-MoE's on all four.
  c.attention_bias_on_output = family.qwen3_attention;
  c.qk_norm = c.reads_head_dim = family.qwen3_attention;
  c.read_decoder_keys(reader);
  if (!reader.get<bool>(family.marker, true))
    reader.fail(family.marker, std::string("the ") + family.plugin + " model plugin needs " + family.marker +
                                   ": true (or the key left out)");
  if (reader.get<int64_t>("pretraining_tp", 1) != 1) reader.fail("pretraining_tp", "only 1 is supported");
  c.read_position_keys(reader);
  ConfigReader moe_section = reader.optional_section("moe_config").value_or(ConfigReader(YAML::Node(YAML::NodeType::Map),
                                                                                          reader.key_path("moe_config"),
                                                                                          reader.origin()));
  c.moe = read_moe_settings(moe_section, c.intermediate_size, c.num_hidden_layers);
  if (!reader.contains("moe_config")) reader.resolved()["moe_config"] = moe_section.resolved();
  reader.finish();

  c.check_decoder_shape(reader);
  const double h = static_cast<double>(c.hidden_size);
  const double experts = static_cast<double>(c.moe.num_experts) * 3.0 * h * static_cast<double>(c.moe.moe_intermediate_size);
  const double layer = h * (2.0 * c.q_features() + 2.0 * c.kv_features()) + experts +
                       3.0 * h * static_cast<double>(std::max(c.intermediate_size, c.moe.shared_expert_intermediate_size));
  check_parameter_count(reader, "hidden_size",
                        static_cast<double>(c.vocab_size) * h * 2.0 + static_cast<double>(c.num_hidden_layers) * layer +
                            static_cast<double>(c.max_position_embeddings) * static_cast<double>(c.head_dim()),
                        "vocab_size, hidden_size, intermediate_size, num_hidden_layers, moe_config.num_experts, "
                        "moe_config.moe_intermediate_size, max_position_embeddings");
  return c;
}

std::vector<double> moe_block_costs(const MoeConfig& c, int64_t sequence_length) {
  const double h = static_cast<double>(c.hidden_size);
  const double q = static_cast<double>(c.q_features());
  const double kv = static_cast<double>(c.kv_features());
  const double seq = static_cast<double>(sequence_length);
  const double projections = h * (q + 2.0 * kv) + q * h;
  const double attention = 2.0 * seq * q;
  const double dense_mlp = 3.0 * h * static_cast<double>(c.intermediate_size);
  const double moe_mlp = c.block_options().multiply_adds_per_token();
  std::vector<double> costs;
  costs.reserve(static_cast<size_t>(c.num_blocks()));
  costs.push_back(0.0);  // embedding lookup
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    costs.push_back(2.0 * projections + 2.0 * attention + 2.0 * (c.is_moe_layer(i) ? moe_mlp : dense_mlp));
  costs.push_back(2.0 * h * static_cast<double>(c.vocab_size));
  return costs;
}

}  // namespace triax::moe
