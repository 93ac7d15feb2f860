#include "mamba2_model.hpp"

#include <ATen/ATen.h>

#include <numeric>

#include "mamba2_init.hpp"
#include "mamba2_mixer.hpp"
#include "ssm_backbone.hpp"
#include "ssm_block.hpp"
#include "triax/error.hpp"

namespace triax::mamba2 {
namespace {

using Mamba2Block = mamba::SsmBlock<Mamba2Mixer, Mamba2LayerCache>;

// What the mixer cannot split: tensor parallelism shards whole groups of heads.
void check_topology(ConfigReader& reader, const Mamba2Config& config, const ModelContext& context) {
  Mamba2Mixer::check_tensor_parallel(reader, config, context);
  mamba::refuse_context_parallel(
      context, "mamba2", "has no attention to split a sequence over (its scan's state is not passed between cp ranks)");
}

}  // namespace

std::vector<double> Mamba2Model::block_costs(ConfigReader& reader, int64_t sequence_length) {
  return mamba2_block_costs(Mamba2Config::read(reader), sequence_length);
}

std::shared_ptr<Mamba2Model> Mamba2Model::create(ConfigReader& reader, const ModelContext& context) {
  const Mamba2Config config = Mamba2Config::read(reader);
  check_topology(reader, config, context);
  check_stage(reader, "num_hidden_layers", config.num_hidden_layers, context, "mamba2");
  const mamba::SsmInit init = read_mamba2_init(context.init_method);  // before allocating: a bad key fails fast
  auto model = std::make_shared<Mamba2Model>(config, context, to_yaml_text(reader.resolved()));
  init_mamba2(model->parameter_table(), config, init, context.seed);
  return model;
}

Mamba2Model::Mamba2Model(const Mamba2Config& config, const ModelContext& context, std::string resolved_yaml)
    : CausalLm(mamba::ssm_backbone_layout("mamba2", config.vocab_size, config.hidden_size, config.num_hidden_layers,
                                          config.tie_word_embeddings),
               context),
      config_(config),
      resolved_yaml_(std::move(resolved_yaml)) {
  const mamba::SsmBlockNorm block{config.hidden_size, config.layer_norm_epsilon, config.residual_in_fp32};
  build([&](int64_t) { return std::make_shared<Mamba2Block>(block, config, context); },
        [&] { return mamba::ssm_final_norm(config.hidden_size, config.layer_norm_epsilon, context); });
}

double Mamba2Model::flops_per_token(int64_t sequence_length) const {
  const std::vector<double> costs = mamba2_block_costs(config_, sequence_length);
  return 3.0 * std::accumulate(costs.begin(), costs.end(), 0.0);
}

int64_t Mamba2Model::total_parameters() const {
  const Mamba2Config& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t layer = h + c.parameter_count();  // the block's norm and its mixer
  const int64_t embedding = padded_vocab_size() * h;
  return embedding + c.num_hidden_layers * layer + h + (c.tie_word_embeddings ? 0 : embedding);
}

}  // namespace triax::mamba2
