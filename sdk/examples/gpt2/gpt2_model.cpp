#include "gpt2_model.hpp"

#include <triax/config_checks.hpp>
#include <triax/init.hpp>
#include <triax/layers/key_value_cache.hpp>

#include <numeric>

namespace gpt2 {

Gpt2Config Gpt2Config::read(triax::ConfigReader& reader) {
  Gpt2Config c;
  c.vocab_size = reader.get<int64_t>("vocab_size", c.vocab_size);
  c.n_positions = reader.get<int64_t>("n_positions", c.n_positions);
  c.n_embd = reader.get<int64_t>("n_embd", c.n_embd);
  c.n_layer = reader.get<int64_t>("n_layer", c.n_layer);
  c.n_head = reader.get<int64_t>("n_head", c.n_head);
  c.n_inner = reader.optional<int64_t>("n_inner").value_or(4 * c.n_embd);
  reader.resolved()["n_inner"] = c.n_inner;
  c.layer_norm_epsilon = reader.get<double>("layer_norm_epsilon", c.layer_norm_epsilon);
  c.initializer_range = reader.get<double>("initializer_range", c.initializer_range);
  c.tie_word_embeddings = reader.get<bool>("tie_word_embeddings", c.tie_word_embeddings);
  c.bos_token_id = reader.get<int64_t>("bos_token_id", c.bos_token_id);
  c.eos_token_id = reader.get<int64_t>("eos_token_id", c.eos_token_id);
  reader.choice("activation_function", {"gelu_new", "gelu_pytorch_tanh"}, "gelu_new");  // both: tanh GELU
  reader.finish();

  const std::pair<const char*, int64_t> sizes[] = {{"vocab_size", c.vocab_size}, {"n_positions", c.n_positions},
                                                    {"n_embd", c.n_embd},         {"n_layer", c.n_layer},
                                                    {"n_head", c.n_head},         {"n_inner", c.n_inner}};
  for (const auto& [key, value] : sizes) triax::require_positive(reader, key, value);
  triax::require_positive(reader, "layer_norm_epsilon", c.layer_norm_epsilon);
  if (c.n_embd % c.n_head != 0)
    reader.fail("n_head", "n_embd (" + std::to_string(c.n_embd) + ") is not divisible by n_head (" +
                              std::to_string(c.n_head) + ")");
  return c;
}

std::vector<double> block_costs(const Gpt2Config& c, int64_t sequence_length) {
  const double h = static_cast<double>(c.n_embd), ffn = static_cast<double>(c.n_inner);
  // 2 FLOPs per multiply-add: c_attn and c_proj (4 h^2), the MLP (2 h ffn), QK^T and AV (2 s h).
  const double layer = 2.0 * (4.0 * h * h + 2.0 * h * ffn + 2.0 * static_cast<double>(sequence_length) * h);
  std::vector<double> costs{0.0};  // the embeddings: lookups
  costs.insert(costs.end(), static_cast<size_t>(c.n_layer), layer);
  costs.push_back(2.0 * h * static_cast<double>(c.vocab_size));  // lm_head
  return costs;
}

namespace {
std::shared_ptr<triax::LayerNorm> layer_norm(const Gpt2Config& c, const triax::ModelContext& context) {
  return std::make_shared<triax::LayerNorm>(c.n_embd, c.layer_norm_epsilon, context.device, context.dtype,
                                            triax::TensorParallel::of(context));
}

triax::CausalLmLayout layout_of(const Gpt2Config& c) {
  // Hugging Face's module names: transformer.{wte, wpe, h.{i}, ln_f}, lm_head.
  return {"gpt2", c.vocab_size, c.n_embd, c.n_layer, c.tie_word_embeddings, c.n_positions,
          "transformer", "wte", "h", "ln_f", "lm_head", "wpe"};
}
}  // namespace

Gpt2Block::Gpt2Block(const Gpt2Config& c, const triax::ModelContext& context) {
  // Registration order is Hugging Face's parameter order.
  ln_1 = register_module("ln_1", layer_norm(c, context));
  attn = register_module("attn", std::make_shared<triax::MultiHeadAttention>(c.n_embd, c.n_head, context));
  ln_2 = register_module("ln_2", layer_norm(c, context));
  mlp = register_module("mlp", std::make_shared<triax::UngatedMlp>(c.n_embd, c.n_inner, triax::UngatedMlpOptions::gpt2(), context));
}

at::Tensor Gpt2Block::forward(const at::Tensor& x, const std::vector<at::Tensor>&) {
  return with_attention(x, attn->forward(ln_1->forward(x)));
}

std::unique_ptr<triax::LayerCache> Gpt2Block::create_cache(int64_t capacity) {
  return std::make_unique<triax::KeyValueCache>(capacity);
}

at::Tensor Gpt2Block::forward_cached(const at::Tensor& x, const std::vector<at::Tensor>&,
                                     const triax::CachedStep& step) {
  return with_attention(x, attn->forward_cached(ln_1->forward(x), step));
}

at::Tensor Gpt2Block::with_attention(const at::Tensor& x, const at::Tensor& attended) {
  const at::Tensor h = x + attended;
  return h + mlp->forward(ln_2->forward(h));
}

std::vector<double> Gpt2Model::block_costs(triax::ConfigReader& reader, int64_t sequence_length) {
  const Gpt2Config config = Gpt2Config::read(reader);
  if (sequence_length > config.n_positions)  // the host asks before building: refuse here
    reader.fail("n_positions", "is " + std::to_string(config.n_positions) + ", shorter than tokens.sequence_length (" +
                                   std::to_string(sequence_length) + ")");
  return gpt2::block_costs(config, sequence_length);
}

std::shared_ptr<Gpt2Model> Gpt2Model::create(triax::ConfigReader& reader, const triax::ModelContext& context) {
  const Gpt2Config config = Gpt2Config::read(reader);
  triax::require_divisible_by_tp(reader, "n_head", config.n_head, context.tp_size);
  triax::require_divisible_by_tp(reader, "n_inner", config.n_inner, context.tp_size);
  check_stage(reader, "n_layer", config.n_layer, context, "gpt2");
  const triax::ScaledInitMethod init =
      triax::read_scaled_init_method(context.init_method, config.initializer_range, config.n_layer);
  auto model = std::make_shared<Gpt2Model>(config, context, triax::to_yaml_text(reader.resolved()));
  // As GPT-2: N(0, std), the residual projections scaled by 1 / sqrt(2 n_layer), norms 1, biases 0.
  triax::init_scaled(model->parameter_table(), init, context.seed, {"c_proj.weight"},
                     {"ln_1.weight", "ln_2.weight", "ln_f.weight"});
  return model;
}

Gpt2Model::Gpt2Model(const Gpt2Config& config, const triax::ModelContext& context, std::string resolved_yaml)
    : CausalLm(layout_of(config), context), config_(config), resolved_yaml_(std::move(resolved_yaml)) {
  build([&](int64_t) { return std::make_shared<Gpt2Block>(config, context); },
        [&] { return triax::CausalLmNorm::of(layer_norm(config, context)); });
}

double Gpt2Model::flops_per_token(int64_t sequence_length) const {
  const std::vector<double> costs = gpt2::block_costs(config_, sequence_length);
  return 3.0 * std::accumulate(costs.begin(), costs.end(), 0.0);
}

int64_t Gpt2Model::total_parameters() const {
  const int64_t h = config_.n_embd, ffn = config_.n_inner;
  const int64_t layer = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (2 * h * ffn + ffn + h);
  const int64_t embedding = padded_vocab_size() * h;
  return embedding + config_.n_positions * h + config_.n_layer * layer + 2 * h +
         (config_.tie_word_embeddings ? 0 : embedding);
}

}  // namespace gpt2
