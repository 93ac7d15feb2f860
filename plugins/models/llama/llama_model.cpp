#include "llama_model.hpp"

#include <numeric>

#include "triax/init.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/swiglu_mlp.hpp"

namespace triax::llama {
namespace {

void check_tensor_parallel_split(ConfigReader& reader, const LlamaConfig& config, int tp_size) {
  auto check = [&](const char* key, int64_t value) {
    if (value % tp_size != 0)
      reader.fail(key,
                  std::to_string(value) + " is not divisible by the tensor parallel size " + std::to_string(tp_size));
  };
  check("hidden_size", config.hidden_size);
  check("num_attention_heads", config.num_attention_heads);
  check("num_key_value_heads", config.num_key_value_heads);
  check("intermediate_size", config.intermediate_size);
}

}  // namespace

std::vector<double> LlamaModel::block_costs(ConfigReader& reader, int64_t sequence_length) {
  LlamaConfig config = LlamaConfig::read(reader);
  // The host asks for the costs before building anything: the place to refuse a sequence the
  // rotary tables cannot cover.
  config.check_sequence_fits(reader, sequence_length);
  return llama_block_costs(config, sequence_length);
}

std::shared_ptr<LlamaModel> LlamaModel::create(ConfigReader& reader, const ModelContext& context) {
  return create_as<LlamaModel>(reader, LlamaConfig::read(reader), context);
}

ScaledInitMethod LlamaModel::checked_init(ConfigReader& reader, const LlamaConfig& config,
                                          const ModelContext& context) {
  check_tensor_parallel_split(reader, config, context.tp_size);
  check_stage(reader, "num_hidden_layers", config.num_hidden_layers, context, "llama");
  return read_scaled_init_method(context.init_method, config.initializer_range, config.num_hidden_layers);
}

std::shared_ptr<PreNormDecoderLayer> LlamaModel::decoder_layer(const LlamaConfig& config, const ModelContext& context,
                                                               int64_t layer) {
  return config.decoder_layer(
      UnaryModule::of(std::make_shared<SwiGluMlp>(config.hidden_size, config.intermediate_size, context)), context,
      layer);
}

LlamaModel::LlamaModel(const LlamaConfig& config, const ModelContext& context, std::string resolved_yaml,
                       const std::string& model_name)
    : CausalLm(config.causal_lm_layout(model_name), context),
      config_(config),
      resolved_yaml_(std::move(resolved_yaml)) {
  build([&](int64_t layer) { return decoder_layer(config, context, layer); },
        [&] { return config.final_norm(context); });
  // One cos/sin table for all of this stage's layers (buffers, not parameters).
  if (!layers().empty())
    rotary_emb_ = body().register_module("rotary_emb", std::make_shared<RotaryEmbedding>(config.rope(), context.device));
}

std::vector<at::Tensor> LlamaModel::layer_inputs(int64_t positions, c10::ScalarType dtype) {
  auto [cos, sin] = rotary_emb_->tables(positions, dtype);
  return {cos, sin};
}

double LlamaModel::flops_per_token(int64_t sequence_length) const {
  std::vector<double> costs = llama_block_costs(config_, sequence_length);
  return 3.0 * std::accumulate(costs.begin(), costs.end(), 0.0);
}

int64_t LlamaModel::total_parameters() const {
  const int64_t h = config_.hidden_size;
  const int64_t q = config_.q_features();
  const int64_t kv = config_.kv_features();
  int64_t layer = h * q + 2 * h * kv + q * h + 3 * h * config_.intermediate_size + 2 * h;
  if (config_.attention_bias) layer += q + 2 * kv;
  if (config_.output_bias()) layer += h;
  if (config_.qk_norm) layer += 2 * config_.head_dim();
  const int64_t embedding = padded_vocab_size() * h;
  return embedding + config_.num_hidden_layers * layer + h + (config_.tie_word_embeddings ? 0 : embedding);
}

}  // namespace triax::llama
