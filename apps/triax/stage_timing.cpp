#include "stage_timing.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "triax/convert/hf_model_format.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/config/train_config.hpp"
#include "triax/device/device.hpp"
#include "triax/core/plugins/plugin_choice.hpp"
#include "triax/core/plugins/plugin_contexts.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/device_wait.hpp"
#include "triax/engine.hpp"
#include "triax/error.hpp"
#include "triax/weight_gradient_queue.hpp"

namespace triax::cli {
namespace {

using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start, const c10::Device& device) {
  wait_for_device(device);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Blocks [first, last) as chunk `stage` of three on one pipeline rank: 0 embeds, 1 is a middle
// stage (neither embedding nor loss), whatever the model's layer count.
triax_model_context stage_context(triax_model_context context, int first, int last, int stage) {
  context.pp_rank = 0;
  context.pp_size = 1;
  context.first_block = first;
  context.last_block = last;
  context.chunk_index = context.virtual_stage = stage;
  context.chunk_count = context.virtual_stage_count = 3;
  return context;
}

// The model's two instances: its embedding, and the stage measured.
struct MeasuredModel {
  std::unique_ptr<ModelInstance> embedding, stage;
  int layers = 0, blocks = 0;
  int64_t vocab = 0;
};

MeasuredModel build_models(const TrainConfig& config, const PluginRegistry& registry, const StageTimingRequest& request,
                           const std::string& device_name, HostServices& host, Communicator& communicator) {
  TrainConfig chosen = config;
  const HfModelFormat hf_folders;
  const PluginChoice plugins = choose_plugins(chosen, registry, &hf_folders);
  const PluginContexts contexts(chosen, RankPlace::first_of(chosen), host);
  MeasuredModel model;
  model.blocks = static_cast<int>(ModelInstance::describe_blocks(*plugins.model, chosen.model.plugin,
                                                                 contexts.model_yaml(), chosen.tokens.sequence_length)
                                      .size());
  if (model.blocks < 3)
    throw ConfigError("triax inspect schedule --measure: the model has " + std::to_string(model.blocks) +
                      " pipeline blocks; a middle stage needs an embedding, a layer and a head");
  const int layers = model.blocks - 2;
  model.layers = request.stage_layers > 0 ? request.stage_layers : std::max(1, layers / std::max(1, request.pp));
  if (model.layers > layers)
    throw ConfigError("--stage-layers: the model has " + std::to_string(layers) + " layers, not " +
                      std::to_string(model.layers));
  model.vocab = ModelInstance::vocab_size(*plugins.model, chosen.model.plugin, contexts.model_yaml());
  const triax_model_context context = contexts.model(communicator, device_name);
  model.embedding = std::make_unique<ModelInstance>(*plugins.model, chosen.model.plugin, contexts.model_yaml(),
                                                    stage_context(context, 0, 1, 0));
  model.stage = std::make_unique<ModelInstance>(*plugins.model, chosen.model.plugin, contexts.model_yaml(),
                                                stage_context(context, 1, 1 + model.layers, 1));
  model.stage->set_training(true);
  return model;
}

StageInput micro_batch(const TrainConfig& config, int64_t vocab, const c10::Device& device) {
  const int64_t rows = config.tokens.micro_batch_size, length = config.tokens.sequence_length;
  const at::TensorOptions ids = at::TensorOptions().dtype(at::kLong).device(device);
  StageInput input;
  input.input_ids = at::randint(vocab, {rows, length}, ids);
  input.label_ids = at::randint(vocab, {rows, length}, ids);
  return input;
}

// One F, B and W of `stage` on `input` (whose boundary comes from the embedding); their times.
// Unsplit, the backward is whole and W takes no time.
std::vector<double> one_pass(const ModelRef& stage, StageInput input, const c10::Device& device, bool split) {
  for (at::Tensor& tensor : input.boundary_in)
    if (at::isFloatingType(tensor.scalar_type())) tensor = tensor.detach().requires_grad_(true);
  input.hidden_in = input.boundary_in.front();
  WeightGradientQueue queue;
  input.weight_gradients = split ? queue.c_queue() : nullptr;
  wait_for_device(device);
  Clock::time_point start = Clock::now();
  const StageOutput output = stage.forward(input);
  const double forward = milliseconds_since(start, device);
  std::vector<at::Tensor> roots, seeds;
  for (const at::Tensor& tensor : output.boundary())
    if (tensor.requires_grad()) {
      roots.push_back(tensor);
      seeds.push_back(at::ones_like(tensor));
    }
  for (const auto& [name, loss] : output.aux_losses) {
    roots.push_back(loss);
    seeds.push_back(at::ones_like(loss));
  }
  start = Clock::now();
  torch::autograd::backward(roots, seeds);
  const double backward_input = milliseconds_since(start, device);
  start = Clock::now();
  queue.run();
  return {forward, backward_input, milliseconds_since(start, device)};
}

}  // namespace

StageTimes measure_stage_times(const StageTimingRequest& request) {
  if (request.repeat < 1) throw ConfigError("--repeat: at least 1 timed run, got " + std::to_string(request.repeat));
  const TrainConfig config = load_train_config(request.config, request.sets);
  PluginRegistry registry;
  std::vector<std::string> paths = config.plugins.paths;
  paths.insert(paths.end(), request.plugin_paths.begin(), request.plugin_paths.end());
  registry.scan_search_paths(paths);
  const c10::Device device = resolve_device(config.general.device, 0);
  SingleProcessCommunicator communicator;
  HostServices host(communicator);
  const MeasuredModel model = build_models(config, registry, request, device.str(), host, communicator);
  StageInput input = micro_batch(config, model.vocab, device);
  {
    const at::NoGradGuard no_grad;
    input.boundary_in = ModelRef(model.embedding->ref()).forward(input).boundary();
  }
  std::vector<std::vector<double>> times(4);  // F, B, W; the backward unsplit
  for (int run = 0; run < request.repeat + 2; ++run) {
    const std::vector<double> split = one_pass(ModelRef(model.stage->ref()), input, device, true);
    const std::vector<double> whole = one_pass(ModelRef(model.stage->ref()), input, device, false);
    if (run < 2) continue;  // allocations, caches, kernel selection
    for (size_t k = 0; k < 3; ++k) times[k].push_back(split[k]);
    times[3].push_back(whole[1]);
  }
  StageTimes result{median(times[0]), median(times[1]), median(times[2]), median(times[3]), ""};
  result.description =
      std::to_string(model.layers) + " of the model's " + std::to_string(model.blocks - 2) + " layers (" +
      config.model.plugin + ", " + config.model.dtype + ") on " + device_display_name(device) + ", a micro-batch of " +
      std::to_string(config.tokens.micro_batch_size) + " x " + std::to_string(config.tokens.sequence_length) +
      " tokens; medians of " + std::to_string(request.repeat) + " runs";
  return result;
}

}  // namespace triax::cli
