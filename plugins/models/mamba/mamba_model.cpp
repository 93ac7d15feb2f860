#include "mamba_model.hpp"

#include <ATen/ATen.h>

#include <numeric>

#include "mamba_init.hpp"
#include "mamba_mixer.hpp"
#include "ssm_backbone.hpp"
#include "ssm_block.hpp"
#include "triax/error.hpp"

namespace triax::mamba {
namespace {

using MambaBlock = SsmBlock<MambaMixer, MambaLayerCache>;

void check_tensor_parallel_split(ConfigReader& reader, const MambaConfig& config, int tp_size) {
  if (config.d_inner() % tp_size != 0)
    reader.fail("ssm_cfg.expand", "d_model x expand = " + std::to_string(config.d_model) + " x " +
                                      std::to_string(config.ssm.expand) + " = " + std::to_string(config.d_inner()) +
                                      " channels are not divisible by the tensor parallel size " +
                                      std::to_string(tp_size));
  if (config.model_vocab_size() % tp_size != 0)
    reader.fail("vocab_size", "the vocabulary of " + std::to_string(config.model_vocab_size()) +
                                  " rows (vocab_size " + std::to_string(config.vocab_size) +
                                  " rounded up to pad_vocab_size_multiple " +
                                  std::to_string(config.pad_vocab_size_multiple) +
                                  ") is not divisible by the tensor parallel size " + std::to_string(tp_size));
}

}  // namespace

std::vector<double> MambaModel::block_costs(ConfigReader& reader, int64_t) {
  return mamba_block_costs(MambaConfig::read(reader));
}

std::shared_ptr<MambaModel> MambaModel::create(ConfigReader& reader, const ModelContext& context) {
  MambaConfig config = MambaConfig::read(reader);
  refuse_context_parallel(context, "mamba",
                          "has no attention to split a sequence over (its selective scan's state is not passed "
                          "between cp ranks)");
  check_tensor_parallel_split(reader, config, context.tp_size);
  check_stage(reader, "num_hidden_layers", config.num_hidden_layers, context, "mamba");
  const SsmInit init = read_mamba_init(context.init_method);  // before allocating: a bad key fails fast
  auto model = std::make_shared<MambaModel>(config, context, to_yaml_text(reader.resolved()));
  init_mamba(model->parameter_table(), config, init, context.seed);
  return model;
}

MambaModel::MambaModel(const MambaConfig& config, const ModelContext& context, std::string resolved_yaml)
    : CausalLm(ssm_backbone_layout("mamba", config.model_vocab_size(), config.d_model, config.num_hidden_layers,
                                   config.tie_word_embeddings),
               context),
      config_(config),
      resolved_yaml_(std::move(resolved_yaml)) {
  const SsmBlockNorm block{config.d_model, config.rms_norm_eps, config.residual_in_fp32};
  build([&](int64_t) { return std::make_shared<MambaBlock>(block, config, context); },
        [&] { return ssm_final_norm(config.d_model, config.rms_norm_eps, context); });
}

double MambaModel::flops_per_token(int64_t) const {
  const std::vector<double> costs = mamba_block_costs(config_);
  return 3.0 * std::accumulate(costs.begin(), costs.end(), 0.0);
}

int64_t MambaModel::total_parameters() const {
  const int64_t h = config_.d_model, d = config_.d_inner(), n = config_.ssm.d_state, r = config_.dt_rank();
  int64_t layer = h                      // norm
                  + 2 * d * h            // in_proj
                  + d * config_.ssm.d_conv + (config_.ssm.conv_bias ? d : 0)  // conv1d
                  + (r + 2 * n) * d      // x_proj
                  + d * r + d            // dt_proj
                  + d * n + d            // A_log, D
                  + h * d;               // out_proj
  if (config_.ssm.bias) layer += 2 * d + h;
  const int64_t embedding = padded_vocab_size() * h;
  return embedding + config_.num_hidden_layers * layer + h + (config_.tie_word_embeddings ? 0 : embedding);
}

}  // namespace triax::mamba
