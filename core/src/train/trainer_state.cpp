#include "train/trainer_state.hpp"

#include <filesystem>
#include <fstream>
#include <optional>

#include "gradients/weight_decay.hpp"
#include "triax/config_reader.hpp"
#include "triax/device/device.hpp"
#include "triax/device/model_memory.hpp"
#include "triax/report/log.hpp"
#include "triax/core/plugins/plugin_choice.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {
namespace {

// A parameter's place in the whole one, as the optimizer reads it (ABI 1.12).
triax_parameter_layout parameter_layout(const ParameterSpec& spec) {
  triax_parameter_layout layout{};
  if (spec.global_shape.size() > TRIAX_MAX_TENSOR_DIMS)
    throw Error("a parameter of " + std::to_string(spec.global_shape.size()) + " dimensions; the ABI carries " +
                std::to_string(TRIAX_MAX_TENSOR_DIMS));
  layout.ndim = static_cast<int32_t>(spec.global_shape.size());
  for (size_t d = 0; d < spec.global_shape.size(); ++d) {
    layout.global_shape[d] = spec.global_shape[d];
    layout.shard_offset[d] = d < spec.shard_offset.size() ? spec.shard_offset[d] : 0;
  }
  return layout;
}

// nanotron's model_config._use_doc_masking, which the data must serve (document positions); the
// model plugin reads the same key. A config taken from a Hugging Face folder has none.
bool uses_document_masking(const TrainConfig& c) {
  const YAML::Node& model_config = c.model.model_config;
  if (!model_config.IsMap() || !model_config["_use_doc_masking"]) return false;
  const YAML::Node value = model_config["_use_doc_masking"];
  if (value.IsNull()) return false;
  bool masking = false;
  if (!value.IsScalar() || !YAML::convert<bool>::decode(value, masking))
    throw ConfigError(c.origin + ": model.model_config._use_doc_masking: expected true or false");
  return masking;
}

}  // namespace

// Data stages, every dataset opened and checked before any work.
void TrainerState::open_data(const triax_model_vtable& model_vtable) {
  const TrainConfig& c = config;
  data::BatchLayout layout;
  layout.sequence_length = c.tokens.sequence_length;
  layout.micro_batch_size = c.tokens.micro_batch_size;
  layout.micro_batches = c.tokens.batch_accumulation_per_replica;
  layout.dp_rank = communicator.rank(TRIAX_GROUP_DP);
  layout.dp_size = communicator.size(TRIAX_GROUP_DP);
  layout.document_positions = uses_document_masking(c);
  int64_t vocab_size = 0;
  in_config_file(c.origin,
                 [&] { vocab_size = ModelInstance::vocab_size(model_vtable, c.model.plugin, contexts->model_yaml()); });
  data = std::make_unique<data::TrainingData>(c, vocab_size, layout, device.is_cuda());
}

void TrainerState::make_engine(const triax_engine_vtable& engine_vtable) {
  in_config_file(config.origin, [&] {
    engine = std::make_unique<EngineInstance>(engine_vtable, config.parallelism.pp_engine, contexts->engine());
  });
}

// This pipeline rank's contiguous run of blocks per model chunk (virtual stage), balanced by
// compute cost unless the config fixes the split.
std::unique_ptr<TiedGradients> TrainerState::make_model(const triax_model_vtable& model_vtable) {
  const TrainConfig& c = config;
  in_config_file(c.origin, [&] {
    block_costs = ModelInstance::describe_blocks(model_vtable, c.model.plugin, contexts->model_yaml(),
                                                 c.tokens.sequence_length);
    std::optional<std::vector<int>> blocks_per_stage;
    if (c.parallelism.pp_blocks_per_stage)
      blocks_per_stage.emplace(c.parallelism.pp_blocks_per_stage->begin(), c.parallelism.pp_blocks_per_stage->end());
    const int chunks = model_chunk_count(*engine, c.parallelism.pp_chunks_per_rank);
    // Without parallelism.pp_chunks_per_rank the engine chose the count: errors name the engine.
    const std::string chunks_engine = c.parallelism.pp_chunks_per_rank > 1 ? "" : "engine '" + engine->name() + "'";
    pipeline_stages = partition_virtual_stages(block_costs, static_cast<int>(c.parallelism.pp), chunks,
                                               blocks_per_stage, chunks_engine);
  });
  const triax_model_context context = contexts->model(communicator, device_name);
  // The model's size as its plugin's mapping to the external format lists it (a Hugging Face
  // tensor map); a plugin without one, or a run without an external format, is not checked.
  const std::optional<double> parameters =
      external_models != nullptr ? external_models->parameter_elements(registry, c.model.plugin, contexts->model_yaml())
                                 : std::nullopt;
  if (parameters) refuse_model_beyond_free_memory(c, *parameters, device);
  in_config_file(c.origin, [&] {
    try {
      model = std::make_unique<ModelChunks>(model_vtable, c.model.plugin, contexts->model_yaml(), context,
                                            pipeline_stages, engine->chunk_placement());
    } catch (const Error& e) {
      // Sizes within every bound can still make a model this device cannot hold: the plugin's
      // allocation fails, and the sizes to change are model_config's.
      const std::string what = e.what();
      for (const char* sign : {"bad_alloc", "not enough memory", "out of memory", "can't allocate"})
        if (what.find(sign) != std::string::npos)
          throw ConfigError(c.origin + ": model.model_config: the model's parameters do not fit in the memory of " +
                            device_display_name(device) + " (" + what +
                            "); make it smaller or split it over more tp/pp ranks");
      throw;
    }
  });
  model->set_training(true);
  flops_per_token = model->flops_per_token(c.tokens.sequence_length);
  auto tied = std::make_unique<TiedGradients>(model->parameters(), communicator);
  // Which copy of each parameter counts in the norm and is saved: one answer for both.
  const TiedGradients* ties = tied.get();
  ownership = std::make_unique<ReplicaOwnership>(
      ReplicaGroups::of(communicator), [ties](const std::string& key) { return ties->counts_in_norm(key); });
  step_losses = std::make_unique<StepLosses>(model->aux_loss_names());
  return tied;
}

// Weights from a checkpoint: resuming loads everything; model.init_method.path (a checkpoint or a
// folder of the external format: a Hugging Face folder) only the weights, over what the plugin
// initialised.
void TrainerState::load_weights() {
  const TrainConfig& c = config;
  checkpoint::TrainingParts parts;
  parts.config = &config;
  parts.communicator = &communicator;
  parts.parameters = &model->parameters();
  parts.data = data.get();
  parts.ownership = ownership.get();
  parts.device = device;
  parts.model_plugin = c.model.plugin;
  parts.save_strategies = save_strategies;
  checkpoint = std::make_unique<checkpoint::TrainingCheckpoint>(parts);
  const std::optional<std::string>& init_path = contexts->init_path();
  if (c.checkpoints.resume_checkpoint_path) {
    if (init_path) log::info("model.init_method.path is ignored: resuming from checkpoints.resume_checkpoint_path");
    checkpoint->begin_resume();
  } else if (init_path) {
    checkpoint::load_initial_weights(*init_path, model->parameters(), communicator, device, registry, c.model.plugin,
                                     external_models);
  }
}

// Weight decay resolved per parameter: the model's own exclusions and the config's patterns.
void TrainerState::make_optimizer(const triax_optimizer_vtable& optimizer_vtable) {
  const TrainConfig& c = config;
  const WeightDecayPolicy weight_decay(c.optimizer.weight_decay, c.optimizer.weight_decay_exclude_named_params);
  std::vector<triax_optimizer_param> params;
  std::vector<int32_t> gradient_groups;
  std::vector<double> lr_scales;
  std::vector<triax_parameter_layout> layouts;
  int excluded = 0;
  for (const auto& p : model->parameters()) {
    excluded += weight_decay.excludes(p) ? 1 : 0;
    params.push_back({p.name.c_str(), borrow_handle(p.tensor), weight_decay.for_parameter(p), p.spec.flags});
    gradient_groups.push_back(p.spec.gradient_group);
    lr_scales.push_back(p.spec.lr_scale);
    layouts.push_back(parameter_layout(p.spec));
  }
  const triax_optimizer_context context = contexts->optimizer(gradient_groups, lr_scales, layouts);
  in_config_file(c.origin, [&] {
    optimizer = std::make_unique<OptimizerInstance>(optimizer_vtable, c.optimizer.plugin, context, params);
  });
  log::info("optimizer " + c.optimizer.plugin + ": " + std::to_string(params.size()) + " parameter tensors, " +
            std::to_string(excluded) + " excluded from weight decay");
  qk_clip = std::make_unique<QkClip>(*model, *optimizer, c.origin);
  if (qk_clip->enabled()) log::info(qk_clip->describe());
}

// The gradient path and the engine step that feeds it.
void TrainerState::make_step(std::unique_ptr<TiedGradients> tied) {
  const TrainConfig& c = config;
  StepGradientOptions options;
  options.accumulate_in_fp32 = c.optimizer.accumulate_grad_in_fp32;
  options.micro_batches = c.tokens.batch_accumulation_per_replica;
  options.bucket_cap_bytes = c.model.ddp_bucket_cap_mb << 20;
  options.overlap_with_backward = !c.general.cuda_graphs;  // a CUDA graph cannot hold the reductions
  gradients = std::make_unique<StepGradients>(model->parameters(), model->parameter_chunks(), model->chunk_count(),
                                              std::move(tied), *ownership, *optimizer, communicator, options);
  for (const auto& line : gradients->describe(c.model.dtype)) log::info(line);

  EngineStepParts parts;
  parts.engine = engine.get();
  parts.model = model.get();
  parts.gradients = gradients.get();
  parts.model_plugin = c.model.plugin;
  parts.place = micro_batch_place();
  parts.micro_batches = c.tokens.batch_accumulation_per_replica;
  parts.record = &pass_record;
  engine_step = std::make_unique<EngineStep>(std::move(parts), c.general.cuda_graphs);
}

void TrainerState::create_run_folder() const {
  std::error_code ec;
  std::filesystem::create_directories(config.run_dir(), ec);
  if (ec)
    throw ConfigError(config.origin + ": checkpoints.checkpoints_path: cannot create the run folder '" +
                      config.run_dir() + "': " + ec.message());
}

MicroBatchPlace TrainerState::micro_batch_place() const {
  MicroBatchPlace place;
  place.device = device;
  place.rank = communicator.rank(TRIAX_GROUP_WORLD);
  place.cp_rank = communicator.rank(TRIAX_GROUP_CP);
  place.cp_size = communicator.size(TRIAX_GROUP_CP);
  place.micro_batch_size = config.tokens.micro_batch_size;
  return place;
}

int64_t TrainerState::tokens_per_step() const {
  const TrainConfig& c = config;
  return c.tokens.micro_batch_size * c.tokens.batch_accumulation_per_replica * communicator.size(TRIAX_GROUP_DP) *
         c.tokens.sequence_length;
}

std::string TrainerState::write_resolved_config() const {
  YAML::Node resolved = YAML::Clone(config.resolved);
  resolved["model"]["model_config"] = YAML::Load(model->resolved_config());
  if (const std::optional<std::string> factory = optimizer->resolved_config())
    resolved["optimizer"]["optimizer_factory"] = YAML::Load(*factory);
  const std::string text = to_yaml_text(resolved);
  if (is_logging_rank()) {
    const std::filesystem::path path = std::filesystem::path(config.run_dir()) / "config.yaml";
    std::ofstream out(path);
    out << "# the configuration of this run, every default filled in\n" << text;
    if (!out) throw Error("cannot write " + path.string());
  }
  return text;
}

std::vector<std::string> TrainerState::describe_run() const {
  const TrainConfig& c = config;
  const int64_t micro_batches = c.tokens.batch_accumulation_per_replica;
  const int64_t dp_size = communicator.size(TRIAX_GROUP_DP);
  std::vector<std::string> lines;
  lines.push_back("model " + c.model.plugin + ": " + std::to_string(model->total_parameters()) + " parameters, " +
                  c.model.dtype + " on " + device_display_name(device) + ", " +
                  std::to_string(static_cast<int64_t>(flops_per_token)) + " training FLOPs per token");
  lines.push_back("batch: " + std::to_string(c.tokens.micro_batch_size) + " sequences x " +
                  std::to_string(micro_batches) + " micro-batches x " + std::to_string(dp_size) + " replicas of " +
                  std::to_string(c.tokens.sequence_length) + " tokens = " + std::to_string(tokens_per_step()) +
                  " tokens per step; engine " + c.parallelism.pp_engine);
  lines.push_back("MFU = model FLOPs per token (" + ModelInstance::flops_formula(registry.model(c.model.plugin)) +
                  ") x tokens/s/device / peak; peak: " +
                  (peak.tflops ? std::to_string(*peak.tflops) + " TFLOP/s (" + peak.source + ")" : peak.source));
  for (const auto& line : data->describe()) lines.push_back(line);
  if (c.parallelism.pp > 1)
    lines.push_back("pipeline: " +
                    describe_virtual_stages(block_costs, pipeline_stages, static_cast<int>(c.parallelism.pp),
                                            engine->chunk_placement()) +
                    (c.parallelism.pp_blocks_per_stage ? " (from parallelism.pp_blocks_per_stage)"
                                                       : " (balanced by compute cost)"));
  return lines;
}

}  // namespace triax
