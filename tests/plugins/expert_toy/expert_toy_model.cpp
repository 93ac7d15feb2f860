// A test-only model plugin, "expert_toy", that exercises the expert-parallel gradient path
// without a real mixture of experts: dense parameters (embedding, per-layer gates, head) beside
// expert weights sharded over the ep group and replicated over edp.
//
// Blocks: the embedding, `num_layers` expert layers, the head. Each expert layer routes every
// token to expert (token id mod num_experts), a fixed rule, so that every topology computes the
// same function: tokens are dispatched to the ep rank holding their expert with the SDK's
// differentiable all_to_all_v, transformed there (tanh(x W_e)), combined back the same way and
// added to the residual stream through a gate. Two named auxiliary losses come from different
// pipeline stages: "embedding_l2" from the embedding, "expert_output_l2" from the expert layers.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "triax/layers/all_to_all.hpp"
#include "triax/plugin.hpp"

namespace triax::test_plugins {
namespace {

struct ToyConfig {
  int64_t vocab_size = 32, hidden_size = 16, num_experts = 4, num_layers = 2;

  static ToyConfig read(ConfigReader& config) {
    ToyConfig c;
    c.vocab_size = config.get<int64_t>("vocab_size", c.vocab_size);
    c.hidden_size = config.get<int64_t>("hidden_size", c.hidden_size);
    c.num_experts = config.get<int64_t>("num_experts", c.num_experts);
    c.num_layers = config.get<int64_t>("num_layers", c.num_layers);
    config.finish();
    return c;
  }
};

// The whole parameter, the same on every rank and topology, then this rank's slice of dim 0.
at::Tensor initial_values(std::vector<int64_t> global_shape, uint64_t seed, int64_t first, int64_t count,
                          const ModelContext& context) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor whole = at::randn(global_shape, generator, at::TensorOptions().dtype(at::kFloat)) * 0.3;
  return whole.narrow(0, first, count).to(context.device, context.dtype).clone();
}

class ToyParameters : public SpecifiedModule {
 public:
  at::Tensor add(const std::string& name, std::vector<int64_t> shape, uint64_t seed, const ModelContext& context) {
    at::Tensor value = initial_values(shape, seed, 0, shape[0], context);
    return register_parameter_with_spec(name, value, ParameterSpec::replicated(value));
  }
  // Experts [E, H, H]: this ep rank holds E / ep of them.
  at::Tensor add_experts(const std::string& name, std::vector<int64_t> shape, uint64_t seed,
                         const ModelContext& context) {
    const int64_t per_rank = shape[0] / context.ep_size, first = context.ep_rank * per_rank;
    at::Tensor value = initial_values(shape, seed, first, per_rank, context);
    at::Tensor registered = register_parameter_with_spec(
        name, value, ParameterSpec::sharded(shape, 0, first, TRIAX_PARAM_TP_REPLICATED));
    mark_expert(name);
    return registered;
  }
};

class ExpertToyModel : public Model {
 public:
  static std::vector<double> block_costs(ConfigReader& config, int64_t) {
    const ToyConfig c = ToyConfig::read(config);
    return std::vector<double>(static_cast<size_t>(c.num_layers + 2), 1.0);
  }

  static std::shared_ptr<ExpertToyModel> create(ConfigReader& config, const ModelContext& context) {
    const ToyConfig c = ToyConfig::read(config);
    if (context.tp_size != 1) config.fail("num_experts", "the expert_toy test model runs at tp = 1 only");
    if (c.num_experts % context.ep_size != 0)
      config.fail("num_experts", "must be a multiple of parallelism.expert_parallel_size (" +
                                     std::to_string(context.ep_size) + ")");
    return std::make_shared<ExpertToyModel>(c, context, to_yaml_text(config.resolved()));
  }

  ExpertToyModel(const ToyConfig& c, const ModelContext& context, std::string resolved)
      : config_(c), context_(context), resolved_(std::move(resolved)) {
    auto& p = *register_module("model", std::make_shared<ToyParameters>());
    const int64_t h = c.hidden_size;
    if (context.holds_block(0)) embedding_ = p.add("embed", {c.vocab_size, h}, context.seed + 1, context);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      if (!context.holds_block(static_cast<int>(l + 1))) continue;
      const std::string prefix = "layers_" + std::to_string(l) + "_";
      const auto layer_seed = context.seed + 100 + 10 * static_cast<uint64_t>(l);
      gates_.push_back(p.add(prefix + "gate", {h}, layer_seed, context));
      experts_.push_back(p.add_experts(prefix + "experts", {c.num_experts, h, h}, layer_seed + 1, context));
    }
    if (context.holds_block(static_cast<int>(c.num_layers + 1)))
      head_ = p.add("head", {c.vocab_size, h}, context.seed + 2, context);
  }

  std::vector<std::string> aux_loss_names() const override { return {"embedding_l2", "expert_output_l2"}; }

  StageOutput forward(const StageInput& input) override {
    StageOutput out;
    const at::Tensor ids = input.input_ids.reshape({-1});
    at::Tensor hidden;
    if (embedding_.defined()) {
      hidden = embedding_.index_select(0, ids);
      out.aux_losses["embedding_l2"] = 0.001 * hidden.pow(2).mean();
    } else {
      hidden = input.hidden_in.reshape({ids.size(0), config_.hidden_size});
    }
    const at::Tensor expert_of_token = at::remainder(ids, config_.num_experts);
    at::Tensor expert_l2;
    for (size_t l = 0; l < experts_.size(); ++l) {
      const at::Tensor moved = experts(hidden, expert_of_token, experts_[l]);
      hidden = hidden + moved * gates_[l];
      const at::Tensor l2 = 0.01 * moved.pow(2).mean();
      expert_l2 = expert_l2.defined() ? expert_l2 + l2 : l2;
    }
    if (expert_l2.defined()) out.aux_losses["expert_output_l2"] = expert_l2;
    if (head_.defined())
      out.loss = at::cross_entropy_loss(at::matmul(hidden, head_.t()).to(at::kFloat), input.label_ids.reshape({-1}));
    else
      out.hidden_out = hidden.reshape({input.input_ids.size(0), input.input_ids.size(1), config_.hidden_size});
    return out;
  }

  double flops_per_token(int64_t) const override { return 6.0 * static_cast<double>(total_parameters()); }
  int64_t total_parameters() const override {
    const int64_t h = config_.hidden_size;
    return 2 * config_.vocab_size * h + config_.num_layers * (h + config_.num_experts * h * h);
  }
  std::string resolved_config() const override { return resolved_; }

 private:
  // Dispatch each token to the ep rank holding its expert, apply the expert, combine back.
  at::Tensor experts(const at::Tensor& hidden, const at::Tensor& expert_of_token, const at::Tensor& weights) const {
    const Host& host = context_.host;
    const int64_t per_rank = config_.num_experts / context_.ep_size;
    // Sorted by expert, tokens are grouped by destination rank too (rank r holds experts
    // [r * per_rank, (r + 1) * per_rank)).
    const at::Tensor order = std::get<1>(at::sort(expert_of_token, /*stable=*/true, /*dim=*/0, /*descending=*/false));
    const at::Tensor sorted_experts = expert_of_token.index_select(0, order);
    const at::Tensor per_destination = at::bincount(at::floor_divide(sorted_experts, per_rank), {}, context_.ep_size);
    const at::Tensor counts = per_destination.cpu();
    const std::vector<int64_t> send(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
    const std::vector<int64_t> receive = exchange_split_sizes(send, TRIAX_GROUP_EP, host, hidden.device());

    const at::Tensor arrived = all_to_all_v(hidden.index_select(0, order), receive, send, TRIAX_GROUP_EP, host);
    const at::Tensor arrived_experts = all_to_all_v(sorted_experts, receive, send, TRIAX_GROUP_EP, host);
    const at::Tensor local = weights.index_select(0, arrived_experts - context_.ep_rank * per_rank);
    const at::Tensor transformed = at::tanh(at::bmm(arrived.unsqueeze(1), local).squeeze(1));
    const at::Tensor returned = all_to_all_v(transformed, send, receive, TRIAX_GROUP_EP, host);
    return returned.index_select(0, at::argsort(order));
  }

  ToyConfig config_;
  ModelContext context_;
  std::string resolved_;
  at::Tensor embedding_, head_;
  std::vector<at::Tensor> gates_, experts_;
};

}  // namespace
}  // namespace triax::test_plugins

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::test_plugins::ExpertToyModel>(
    "expert_toy", "1.0.0", "test model: dense parameters and experts sharded over ep, fixed token routing"))
