#include "moe_model.hpp"

#include <algorithm>
#include <numeric>

#include "moe_block.hpp"
#include "router_losses.hpp"
#include "triax/error.hpp"
#include "triax/init.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/pre_norm_decoder_layer.hpp"
#include "triax/layers/swiglu_mlp.hpp"

namespace triax::moe {
namespace {

void check_parallel_split(ConfigReader& reader, const MoeConfig& config, const ModelContext& context) {
  auto check = [&](const char* key, int64_t value) {
    if (value % context.tp_size != 0)
      reader.fail(key, std::to_string(value) + " is not divisible by the tensor parallel size " +
                           std::to_string(context.tp_size));
  };
  check("hidden_size", config.hidden_size);
  check("num_attention_heads", config.num_attention_heads);
  check("num_key_value_heads", config.num_key_value_heads);
  check("intermediate_size", config.intermediate_size);
  if (config.moe.enable_shared_expert && config.moe.shared_expert_intermediate_size % context.tp_size != 0)
    reader.fail("moe_config.shared_expert_intermediate_size",
                std::to_string(config.moe.shared_expert_intermediate_size) +
                    " is not divisible by the tensor parallel size " + std::to_string(context.tp_size));
  if (config.moe.num_experts % context.ep_size != 0)
    reader.fail("moe_config.num_experts", std::to_string(config.moe.num_experts) +
                                              " is not divisible by parallelism.expert_parallel_size (" +
                                              std::to_string(context.ep_size) + "): each ep rank holds as many experts");
}

}  // namespace

std::vector<double> MoeModel::block_costs(ConfigReader& reader, int64_t sequence_length) {
  MoeConfig config = MoeConfig::read(reader);
  config.check_sequence_fits(reader, sequence_length);
  return moe_block_costs(config, sequence_length);
}

std::shared_ptr<MoeModel> MoeModel::create(ConfigReader& reader, const ModelContext& context) {
  return create_as<MoeModel>(reader, MoeConfig::read(reader), context, "moe");
}

ScaledInitMethod MoeModel::checked_init(ConfigReader& reader, const MoeConfig& config, const ModelContext& context,
                                        const std::string& model_name) {
  check_parallel_split(reader, config, context);
  check_stage(reader, "num_hidden_layers", config.num_hidden_layers, context, model_name);
  return read_scaled_init_method(context.init_method, config.initializer_range, config.num_hidden_layers);
}

MoeModel::MoeModel(const MoeConfig& config, const ModelContext& context, std::string resolved_yaml,
                   const std::string& model_name)
    : CausalLm(config.causal_lm_layout(model_name), context),
      config_(config),
      resolved_yaml_(std::move(resolved_yaml)) {
  auto make_layer = [&](int64_t layer) {
    if (!config.is_moe_layer(layer))
      return config.decoder_layer(
          UnaryModule::of(std::make_shared<SwiGluMlp>(config.hidden_size, config.intermediate_size, context)), context,
          layer);
    moe_blocks_.push_back(std::make_shared<MoeBlock>(config.block_options(), context));
    return config.decoder_layer(UnaryModule::of(moe_blocks_.back()), context, layer);
  };
  build(make_layer, [&] { return config.final_norm(context); });
  if (!layers().empty())
    rotary_emb_ = body().register_module("rotary_emb", std::make_shared<RotaryEmbedding>(config.rope(), context.device));
}

std::vector<at::Tensor> MoeModel::layer_inputs(int64_t positions, c10::ScalarType dtype) {
  auto [cos, sin] = rotary_emb_->tables(positions, dtype);
  return {cos, sin};
}

bool MoeModel::captures_decode_steps(int64_t rows) const {
  return std::all_of(moe_blocks_.begin(), moe_blocks_.end(),
                     [rows](const std::shared_ptr<MoeBlock>& block) { return block->serves_by_expert(rows); });
}

StageOutput MoeModel::forward(const StageInput& input) {
  StageOutput out = CausalLm::forward(input);
  add_router_losses(moe_blocks_, {config_.moe.router_aux_loss_coef, config_.moe.router_z_loss_coef},
                    config_.moe_layer_count(), out.aux_losses);
  return out;
}

std::vector<std::string> MoeModel::aux_loss_names() const {
  std::vector<std::string> names = CausalLm::aux_loss_names();  // the LM z-loss, when on
  names.insert(names.end(), router_loss_names().begin(), router_loss_names().end());
  return names;
}

double MoeModel::flops_per_token(int64_t sequence_length) const {
  std::vector<double> costs = moe_block_costs(config_, sequence_length);
  return 3.0 * std::accumulate(costs.begin(), costs.end(), 0.0);
}

int64_t MoeModel::total_parameters() const {
  const MoeConfig& c = config_;
  const int64_t h = c.hidden_size, q = c.q_features(), kv = c.kv_features();
  int64_t attention = h * q + 2 * h * kv + q * h + 2 * h;
  if (c.attention_bias) attention += q + 2 * kv;
  if (c.output_bias()) attention += h;
  if (c.qk_norm) attention += 2 * c.head_dim();
  const int64_t moe_mlp = c.block_options().parameter_count();
  const int64_t dense_mlp = 3 * h * c.intermediate_size;
  const int64_t moe_layers = c.moe_layer_count();
  const int64_t embedding = padded_vocab_size() * h;
  return embedding + c.num_hidden_layers * attention + moe_layers * moe_mlp +
         (c.num_hidden_layers - moe_layers) * dense_mlp + h + (c.tie_word_embeddings ? 0 : embedding);
}

}  // namespace triax::moe
