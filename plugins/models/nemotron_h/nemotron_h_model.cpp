#include "nemotron_h_model.hpp"

#include <ATen/ATen.h>

#include <numeric>
#include <set>

#include "hybrid_layer.hpp"
#include "layer_kinds.hpp"
#include "moe_block.hpp"
#include "nemotron_h_init.hpp"
#include "router_losses.hpp"
#include "ssm_backbone.hpp"
#include "triax/error.hpp"

namespace triax::nemotron_h {
namespace {

// What the pattern's layers cannot split: each kind's tensor-parallel unit, and sequences over
// context-parallel ranks (a Mamba-2 scan's state is not passed between them).
void check_topology(ConfigReader& reader, const NemotronHConfig& config, const ModelContext& context) {
  const std::set<char> letters(config.hybrid_override_pattern.begin(), config.hybrid_override_pattern.end());
  for (char letter : letters) layer_kind(letter).check_tensor_parallel(reader, config, context);
  mamba::refuse_context_parallel(context, "nemotron_h",
                                 "does not split a sequence over cp ranks (a Mamba-2 layer's state is not passed "
                                 "between them)");
}

}  // namespace

std::vector<double> NemotronHModel::block_costs(ConfigReader& reader, int64_t sequence_length) {
  return nemotron_h_block_costs(NemotronHConfig::read(reader), sequence_length);
}

std::shared_ptr<NemotronHModel> NemotronHModel::create(ConfigReader& reader, const ModelContext& context) {
  const NemotronHConfig config = NemotronHConfig::read(reader);
  check_topology(reader, config, context);
  check_stage(reader, "num_hidden_layers", config.num_hidden_layers, context, "nemotron_h");
  const mamba::SsmInit init = read_nemotron_h_init(context.init_method);  // before allocating: a bad key fails fast
  auto model = std::make_shared<NemotronHModel>(config, context, to_yaml_text(reader.resolved()));
  init_nemotron_h(model->parameter_table(), config, init, context.seed);
  return model;
}

NemotronHModel::NemotronHModel(const NemotronHConfig& config, const ModelContext& context, std::string resolved_yaml)
    : CausalLm(mamba::ssm_backbone_layout("nemotron_h", config.vocab_size, config.hidden_size, config.num_hidden_layers,
                                          config.tie_word_embeddings),
               context),
      config_(config),
      resolved_yaml_(std::move(resolved_yaml)) {
  build(
      [&](int64_t layer) {
        auto hybrid = std::make_shared<HybridLayer>(config, layer_kind(config.letter(layer)), context);
        if (auto block = std::dynamic_pointer_cast<moe::MoeBlock>(hybrid->mixer())) moe_blocks_.push_back(block);
        return hybrid;
      },
      [&] { return mamba::ssm_final_norm(config.hidden_size, config.layer_norm_epsilon, context); });
}

StageOutput NemotronHModel::forward(const StageInput& input) {
  StageOutput out = CausalLm::forward(input);
  if (config_.moe_block)
    moe::add_router_losses(moe_blocks_, config_.router_losses, config_.layers_of('E'), out.aux_losses);
  return out;
}

std::vector<std::string> NemotronHModel::aux_loss_names() const {
  std::vector<std::string> names = CausalLm::aux_loss_names();  // the LM z-loss, when on
  if (config_.moe_block) names.insert(names.end(), moe::router_loss_names().begin(), moe::router_loss_names().end());
  return names;
}

double NemotronHModel::flops_per_token(int64_t sequence_length) const {
  const std::vector<double> costs = nemotron_h_block_costs(config_, sequence_length);
  return 3.0 * std::accumulate(costs.begin(), costs.end(), 0.0);
}

int64_t NemotronHModel::total_parameters() const {
  const int64_t h = config_.hidden_size;
  int64_t layers = 0;
  for (char letter : config_.hybrid_override_pattern) layers += h + layer_kind(letter).parameter_count(config_);
  const int64_t embedding = padded_vocab_size() * h;
  return embedding + layers + h + (config_.tie_word_embeddings ? 0 : embedding);
}

}  // namespace triax::nemotron_h
