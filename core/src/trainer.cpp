#include "triax/core/trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "triax/config_reader.hpp"
#include "triax/located_yaml.hpp"
#include "triax/core/checkpoint/training_checkpoint.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/data/training_data.hpp"
#include "triax/core/gradients/data_parallel_gradients.hpp"
#include "triax/core/gradients/gradient_accumulator.hpp"
#include "triax/core/gradients/gradient_norm.hpp"
#include "triax/core/gradients/replica_ownership.hpp"
#include "triax/core/comm/launch_environment.hpp"
#include "triax/core/device.hpp"
#include "triax/core/log.hpp"
#include "triax/core/lr_schedule.hpp"
#include "run_reporter.hpp"
#include "comm/world_reduce.hpp"
#include "fault_injection.hpp"
#include "nonfinite_guard.hpp"
#include "preemption.hpp"
#include "step_profiler.hpp"
#include "step_read_back.hpp"
#include "triax/core/plugins/mesh_model_context.hpp"
#include "triax/core/plugins/plugin_choice.hpp"
#include "step_losses.hpp"
#include "engine_step.hpp"
#include "model_chunks.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "gradients/tied_gradients.hpp"
#include "triax/core/gradients/weight_decay.hpp"
#include "triax/error.hpp"
#include "triax/pipeline_blocks.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Peak memory of the step's device: the CUDA caching allocator's peak, or the process's peak
// resident memory on CPU.
int64_t peak_memory_bytes([[maybe_unused]] const c10::Device& device) {
#ifdef TRIAX_WITH_CUDA
  if (device.is_cuda())
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
        .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .peak;
#endif
  return peak_resident_bytes();
}

}  // namespace

struct Trainer::State {
  TrainConfig config;
  PluginRegistry& registry;
  Communicator& communicator;
  HostServices host;
  c10::Device device = c10::Device(c10::kCPU);
  std::unique_ptr<ModelChunks> model;  // one instance per model chunk the engine asked for
  std::unique_ptr<OptimizerInstance> optimizer;
  std::unique_ptr<EngineInstance> engine;
  std::unique_ptr<GradientAccumulator> gradients;
  std::unique_ptr<TiedGradients> tied;
  std::unique_ptr<ReplicaOwnership> ownership;
  std::unique_ptr<StepLosses> step_losses;
  std::unique_ptr<DataParallelGradients> dp_gradients;
  std::unique_ptr<EngineStep> engine_step;
  std::vector<double> block_costs;           // forward FLOPs per token of each pipeline block
  std::vector<StageBlocks> pipeline_stages;  // blocks of each virtual stage (pp x model chunks)
  std::unique_ptr<data::TrainingData> data;
  std::unique_ptr<checkpoint::TrainingCheckpoint> checkpoint;
  checkpoint::ResumePoint resume;  // step 0 unless resuming
  std::string init_method_yaml;
  std::string parallelism_yaml;
  std::string optimizer_yaml;
  double flops_per_token = 0.0;
  DevicePeak peak;

  State(TrainConfig c, PluginRegistry& r, Communicator& comm)
      : config(std::move(c)), registry(r), communicator(comm), host(comm) {}
};

Trainer::Trainer(TrainConfig config, PluginRegistry& registry, Communicator& communicator)
    : state_(std::make_unique<State>(std::move(config), registry, communicator)) {
  State& s = *state_;
  const TrainConfig& c = s.config;
  validate_for_world(c, communicator.size(TRIAX_GROUP_WORLD));
  // nanotron keys this version reads but does not act on: say so rather than ignore them silently.
  if (c.parallelism.moe_layer_recompute)
    log::warning(
        "parallelism.moe_layer_recompute: not implemented in this version; MoE layers keep their activations "
        "(parallelism.recompute_layer recomputes every layer)");
  s.device = resolve_device(c.general.device);

  // Plugins named by the config, each refused with the file, the key and the available names if
  // unknown; the model plugin chosen by its marker or a Hugging Face folder's architecture where
  // the config names none.
  const PluginChoice plugins = choose_plugins(s.config, registry);
  const triax_model_vtable& model_vtable = *plugins.model;
  const triax_engine_vtable& engine_vtable = *plugins.engine;
  const triax_optimizer_vtable& optimizer_vtable = *plugins.optimizer;

  // Data stages, every dataset opened and checked before any work.
  data::BatchLayout layout;
  layout.sequence_length = c.tokens.sequence_length;
  layout.micro_batch_size = c.tokens.micro_batch_size;
  layout.micro_batches = c.tokens.batch_accumulation_per_replica;
  layout.dp_rank = communicator.rank(TRIAX_GROUP_DP);
  layout.dp_size = communicator.size(TRIAX_GROUP_DP);
  const std::string model_yaml = to_located_yaml_text(c.model.model_config, c.origin);
  int64_t vocab_size = 0;
  in_config_file(c.origin, [&] { vocab_size = ModelInstance::vocab_size(model_vtable, c.model.plugin, model_yaml); });
  s.data = std::make_unique<data::TrainingData>(c, vocab_size, layout, s.device.is_cuda());

  at::manual_seed(static_cast<uint64_t>(c.general.seed));

  // The engine first: it says how many model chunks it wants on each pipeline rank.
  s.parallelism_yaml = to_located_yaml_text(c.parallelism.section, c.origin);
  triax_engine_context engine_context{};
  engine_context.struct_size = sizeof(engine_context);
  engine_context.pp_rank = communicator.rank(TRIAX_GROUP_PP);
  engine_context.pp_size = communicator.size(TRIAX_GROUP_PP);
  engine_context.parallelism_yaml = s.parallelism_yaml.c_str();
  engine_context.host = s.host.c_host();
  engine_context.micro_batches = static_cast<int32_t>(c.tokens.batch_accumulation_per_replica);
  in_config_file(c.origin, [&] {
    s.engine = std::make_unique<EngineInstance>(engine_vtable, c.parallelism.pp_engine, engine_context);
  });

  // The model: this pipeline rank's contiguous run of blocks per model chunk (virtual stage),
  // balanced by compute cost unless the config fixes the split.
  // model.init_method.path is the host's business (weights from a checkpoint or a Hugging Face
  // folder, loaded below); the plugin initialises as usual and is then overwritten.
  const YAML::Node& init_method = c.model.init_method;
  std::optional<std::string> init_path;
  if (init_method.IsMap() && init_method["path"]) init_path = init_method["path"].as<std::string>();
  s.init_method_yaml = to_located_yaml_text(init_method, c.origin, {"path"});
  std::vector<double>& block_costs = s.block_costs;
  in_config_file(c.origin, [&] {
    block_costs = ModelInstance::describe_blocks(model_vtable, c.model.plugin, model_yaml, c.tokens.sequence_length);
    std::optional<std::vector<int>> blocks_per_stage;
    if (c.parallelism.pp_blocks_per_stage)
      blocks_per_stage.emplace(c.parallelism.pp_blocks_per_stage->begin(), c.parallelism.pp_blocks_per_stage->end());
    s.pipeline_stages =
        partition_virtual_stages(block_costs, static_cast<int>(c.parallelism.pp),
                                 model_chunk_count(*s.engine, c.parallelism.pp_chunks_per_rank), blocks_per_stage);
  });
  const std::string device_string = s.device.str();
  triax_model_context context = mesh_model_context(communicator);
  context.device = device_string.c_str();
  context.dtype = c.model.dtype.c_str();
  context.seed = static_cast<uint64_t>(c.general.seed);
  context.init_method_yaml = s.init_method_yaml.c_str();
  context.tp_mode = c.parallelism.tp_mode == "REDUCE_SCATTER" ? 1 : 0;
  context.make_vocab_size_divisible_by = c.model.make_vocab_size_divisible_by;
  context.host = s.host.c_host();
  context.recompute_layer = c.parallelism.recompute_layer ? 1 : 0;
  context.recompute_layer_count = static_cast<int32_t>(c.parallelism.recompute_num_layers.value_or(0));
  // With one tp rank there is nothing to overlap: the layers keep their plain path.
  context.tp_linear_async_communication = c.parallelism.tp_linear_async_communication && c.parallelism.tp > 1;
  context.recompute_mlp_activation = c.parallelism.recompute_mlp_activation ? 1 : 0;
  in_config_file(c.origin, [&] {
    try {
      s.model = std::make_unique<ModelChunks>(model_vtable, c.model.plugin, model_yaml, context, s.pipeline_stages);
    } catch (const Error& e) {
      // Sizes within every bound can still make a model this device cannot hold: the plugin's
      // allocation fails, and the sizes to change are model_config's.
      const std::string what = e.what();
      for (const char* sign : {"bad_alloc", "not enough memory", "out of memory", "can't allocate"})
        if (what.find(sign) != std::string::npos)
          throw ConfigError(c.origin + ": model.model_config: the model's parameters do not fit in the memory of " +
                            device_display_name(s.device) + " (" + what +
                            "); make it smaller or split it over more tp/pp ranks");
      throw;
    }
  });
  s.model->set_training(true);
  s.flops_per_token = s.model->flops_per_token(c.tokens.sequence_length);
  s.tied = std::make_unique<TiedGradients>(s.model->parameters(), communicator);
  // Which copy of each parameter counts in the norm and is saved: one answer for both.
  const TiedGradients* tied = s.tied.get();
  s.ownership = std::make_unique<ReplicaOwnership>(
      ReplicaGroups::of(communicator), [tied](const std::string& key) { return tied->counts_in_norm(key); });
  s.step_losses = std::make_unique<StepLosses>(s.model->aux_loss_names());

  // Weights from a checkpoint: resuming loads everything; init_method.path only the weights.
  checkpoint::TrainingParts parts;
  parts.config = &s.config;
  parts.communicator = &communicator;
  parts.parameters = &s.model->parameters();
  parts.data = s.data.get();
  parts.ownership = s.ownership.get();
  parts.device = s.device;
  parts.model_plugin = c.model.plugin;
  s.checkpoint = std::make_unique<checkpoint::TrainingCheckpoint>(parts);
  if (c.checkpoints.resume_checkpoint_path) {
    if (init_path)
      log::info("model.init_method.path is ignored: resuming from checkpoints.resume_checkpoint_path");
    s.checkpoint->begin_resume();
  } else if (init_path) {
    checkpoint::load_initial_weights(*init_path, s.model->parameters(), communicator, s.device, registry,
                                     c.model.plugin);
  }

  // Optimizer: weight decay resolved per parameter (model's own exclusions + config patterns).
  const WeightDecayPolicy weight_decay(c.optimizer.weight_decay, c.optimizer.weight_decay_exclude_named_params);
  std::vector<triax_optimizer_param> params;
  std::vector<int32_t> gradient_groups;
  std::vector<double> lr_scales;
  int excluded = 0;
  for (const auto& p : s.model->parameters()) {
    excluded += weight_decay.excludes(p) ? 1 : 0;
    params.push_back({p.name.c_str(), borrow_handle(p.tensor), weight_decay.for_parameter(p), p.spec.flags});
    gradient_groups.push_back(p.spec.gradient_group);
    lr_scales.push_back(p.spec.lr_scale);
  }
  s.optimizer_yaml = to_located_yaml_text(c.optimizer.section, c.origin);
  triax_optimizer_context optimizer_context{};
  optimizer_context.struct_size = sizeof(optimizer_context);
  optimizer_context.dp_rank = context.dp_rank;
  optimizer_context.dp_size = context.dp_size;
  optimizer_context.optimizer_yaml = s.optimizer_yaml.c_str();
  optimizer_context.host = s.host.c_host();
  optimizer_context.gradient_groups = gradient_groups.data();
  optimizer_context.lr_scales = lr_scales.data();
  in_config_file(c.origin, [&] {
    s.optimizer = std::make_unique<OptimizerInstance>(optimizer_vtable, c.optimizer.plugin, optimizer_context, params);
  });
  log::info("optimizer " + c.optimizer.plugin + ": " + std::to_string(params.size()) + " parameter tensors, " +
            std::to_string(excluded) + " excluded from weight decay");

  s.checkpoint->set_optimizer(s.optimizer.get());
  s.resume = s.checkpoint->finish_resume();

  const bool sharded = s.optimizer->gradient_sharding() == TRIAX_GRADIENTS_DP_SHARDED;
  const GradientHandoff handoff =
      choose_gradient_handoff({c.optimizer.accumulate_grad_in_fp32, c.tokens.batch_accumulation_per_replica,
                               !s.tied->empty(), s.optimizer->takes_scaled_gradients()});
  s.gradients =
      std::make_unique<GradientAccumulator>(s.model->parameters(), c.optimizer.accumulate_grad_in_fp32, handoff);
  if (handoff == GradientHandoff::kAsComputed)
    log::info("gradients: handed to the optimizer as the backward computed them, in " + c.model.dtype +
              ": one micro-batch a step leaves nothing to sum in fp32, so no fp32 gradient buffers");
  s.dp_gradients = std::make_unique<DataParallelGradients>(
      s.model->parameters(), s.optimizer->gradient_sharding(), c.model.ddp_bucket_cap_mb << 20,
      s.ownership->groups(), s.ownership->counted_in_norm(s.model->parameters(), sharded));
  // A CUDA graph cannot hold the reductions: with one, they run after the backward.
  if (context.dp_size > 1 && communicator.has_asynchronous_collectives() && !c.general.cuda_graphs)
    s.dp_gradients->overlap_with_backward(
        [gradients = s.gradients.get()](size_t k) { return gradients->final_gradient(k); }, s.tied->tied_parameters(),
        communicator);
  s.dp_gradients->set_parameter_chunks(s.model->parameter_chunks(), s.model->chunk_count());
  EngineStepParts step_parts;
  step_parts.engine = s.engine.get();
  step_parts.model = s.model.get();
  step_parts.gradients = s.gradients.get();
  step_parts.dp_gradients = s.dp_gradients.get();
  step_parts.model_plugin = c.model.plugin;
  step_parts.device = s.device;
  step_parts.rank = communicator.rank(TRIAX_GROUP_WORLD);
  step_parts.micro_batch_size = c.tokens.micro_batch_size;
  step_parts.micro_batches = c.tokens.batch_accumulation_per_replica;
  s.engine_step = std::make_unique<EngineStep>(std::move(step_parts), c.general.cuda_graphs);
  log::info(s.dp_gradients->describe());
  s.peak = device_peak(device_display_name(s.device), c.logging.peak_tflops);

  // The run folder only once the config, the plugins and the data are accepted: a refused run
  // leaves nothing behind.
  std::error_code ec;
  fs::create_directories(c.run_dir(), ec);
  if (ec)
    throw ConfigError(c.origin + ": checkpoints.checkpoints_path: cannot create the run folder '" + c.run_dir() +
                      "': " + ec.message());
}

Trainer::~Trainer() = default;

const std::vector<NamedParameter>& Trainer::parameters() const { return state_->model->parameters(); }
const TrainConfig& Trainer::config() const { return state_->config; }

TrainSummary Trainer::train() {
  State& s = *state_;
  const TrainConfig& c = s.config;
  const bool is_logging_rank = s.communicator.rank(TRIAX_GROUP_WORLD) == 0;
  const int64_t dp_size = s.communicator.size(TRIAX_GROUP_DP);
  const int64_t world_size = s.communicator.size(TRIAX_GROUP_WORLD);
  const int64_t micro_batches = c.tokens.batch_accumulation_per_replica;
  const int64_t samples_per_step = c.tokens.micro_batch_size * micro_batches * dp_size;
  const int64_t tokens_per_step = samples_per_step * c.tokens.sequence_length;

  // The run folder (created before any work): resolved config, core + the model plugin's own.
  YAML::Node resolved = YAML::Clone(c.resolved);
  resolved["model"]["model_config"] = YAML::Load(s.model->resolved_config());
  if (is_logging_rank) {
    std::ofstream out(fs::path(c.run_dir()) / "config.yaml");
    out << "# the configuration of this run, every default filled in\n" << to_yaml_text(resolved);
    if (!out) throw Error("cannot write " + (fs::path(c.run_dir()) / "config.yaml").string());
  }
  // Every output opened before the first step: one that cannot be written stops the run now.
  RunReporter reporter(c, is_logging_rank, s.resume.step);
  StepProfiler profiler(c.profiler, c.origin, s.communicator.rank(TRIAX_GROUP_WORLD), s.device.is_cuda());

  log::info("model " + c.model.plugin + ": " + std::to_string(s.model->total_parameters()) + " parameters, " +
            c.model.dtype + " on " + device_display_name(s.device) + ", " +
            std::to_string(static_cast<int64_t>(s.flops_per_token)) + " training FLOPs per token");
  log::info("batch: " + std::to_string(c.tokens.micro_batch_size) + " sequences x " + std::to_string(micro_batches) +
            " micro-batches x " + std::to_string(dp_size) + " replicas of " + std::to_string(c.tokens.sequence_length) +
            " tokens = " + std::to_string(tokens_per_step) + " tokens per step; engine " + c.parallelism.pp_engine);
  log::info("MFU = model FLOPs per token (" + ModelInstance::flops_formula(s.registry.model(c.model.plugin)) +
            ") x tokens/s/device / peak; peak: " +
            (s.peak.tflops ? std::to_string(*s.peak.tflops) + " TFLOP/s (" + s.peak.source + ")" : s.peak.source));
  for (const auto& line : s.data->describe()) log::info(line);
  if (c.parallelism.pp > 1)
    log::info(
        "pipeline: " + describe_virtual_stages(s.block_costs, s.pipeline_stages, static_cast<int>(c.parallelism.pp)) +
        (c.parallelism.pp_blocks_per_stage ? " (from parallelism.pp_blocks_per_stage)"
                                           : " (balanced by compute cost)"));
  if (!s.tied->empty()) log::info("tied across pipeline stages: " + s.tied->describe());
  for (const auto& line : reporter.describe()) log::info(line);
  if (c.profiler) log::info(profiler.describe());

  LearningRateSchedule schedule(s.resume.lr_scheduler);
  NonFiniteGuard nonfinite(c);
  const preemption::SignalWatch preemption_watch(c.general.preemption_signals);
  const int rank = s.communicator.rank(TRIAX_GROUP_WORLD);
  TrainSummary summary;
  summary.consumed_tokens = s.resume.consumed_tokens;
  const std::string resolved_text = to_yaml_text(resolved);
  if (s.resume.step == 0 && s.checkpoint->due(0))
    s.checkpoint->save(0, 0, s.resume.lr_scheduler, resolved_text);
  if (s.resume.step >= c.tokens.train_steps)
    log::warning("the checkpoint is at step " + std::to_string(s.resume.step) + ", tokens.train_steps is " +
                 std::to_string(c.tokens.train_steps) + ": nothing left to train");
  std::vector<at::Tensor> step_losses, step_norms;
  const auto start = Clock::now();
  // The logging interval: from interval_start, the steps after interval_first.
  auto interval_start = start;
  int64_t interval_first = s.resume.step;
  StepReadBack read_back(s.device);
  StepMetrics queued;  // what the host knew of the step whose values read_back holds
  // The one host synchronisation of a logged step, one step late: its loss and norm are read
  // together, by every rank (they are equal everywhere), so that every rank stops on divergence.
  auto report_logged_step = [&] {
    StepReadBack::Values values = read_back.take();
    StepMetrics m = std::move(queued);
    m.loss = StepLosses::loss(values.host);
    m.aux_losses = s.step_losses->aux_losses(values.host);
    m.grad_norm = values.host[-1].item<double>();
    m.step_seconds = std::chrono::duration<double>(values.read_at - interval_start).count() /
                     static_cast<double>(m.step - interval_first);
    m.tokens_per_second = static_cast<double>(tokens_per_step) / m.step_seconds;
    m.tokens_per_second_per_device = m.tokens_per_second / static_cast<double>(world_size);
    m.model_tflops_per_device = s.flops_per_token * m.tokens_per_second_per_device / 1e12;
    if (s.peak.tflops) m.mfu = m.model_tflops_per_device / *s.peak.tflops;
    m.peak_memory_bytes = peak_memory_bytes(s.device);
    m.elapsed_seconds = std::chrono::duration<double>(values.read_at - start).count();
    m.eta_seconds = m.step_seconds * static_cast<double>(c.tokens.train_steps - m.step);
    reporter.logged(m);
    nonfinite.check(m.step, m.loss, m.grad_norm);
    interval_start = values.read_at;
    interval_first = m.step;
  };

  for (int64_t step = s.resume.step + 1; step <= c.tokens.train_steps; ++step) {
    s.communicator.set_step(step);  // labels communication errors and this rank's heartbeat
    profiler.before_step(step);
    EngineInstance::Result result = s.engine_step->run(step, s.data->step_samples(step));  // prefetched
    if (read_back.pending()) report_logged_step();  // the GPU has this step's work queued
    s.tied->sum(s.gradients->gradients());
    summary.peak_live_micro_batches = std::max(summary.peak_live_micro_batches, result.peak_live_micro_batches);

    if (fault::armed("nan_grad", rank, step)) s.gradients->gradients().front().fill_(NAN);
    s.dp_gradients->reduce_over_data_parallel(s.gradients->gradients(), s.communicator);
    const GlobalNorm clipping = s.dp_gradients->norm(c.optimizer.clip_grad, s.communicator);
    const at::Tensor& norm = clipping.norm;
    const double lr = schedule.for_step(step);
    const at::Tensor losses = s.step_losses->reduce(result, s.communicator, s.device);  // LM loss, aux losses
    if (fault::armed("nan_loss", rank, step)) losses[0].fill_(NAN);
    fault::kill_if_armed("optimizer_step", rank, step);
    if (nonfinite.admit(step, losses[0], norm))
      s.optimizer->step(s.dp_gradients->for_optimizer(), lr, clipping.coefficient);  // clipped by the optimizer
    // The step's collectives have completed, or a CommunicationError names the silent peer. The
    // GPU still has the optimizer's work queued, so this wait costs it nothing.
    s.communicator.settle();
    step_losses.push_back(losses[0]);
    step_norms.push_back(norm);
    summary.learning_rates.push_back(lr);
    summary.consumed_tokens += tokens_per_step;
    s.data->after_step(step);
    profiler.after_step(step);

    const bool log_now = step % c.logging.iteration_step_info_interval == 0 || step == c.tokens.train_steps;
    if (log_now) {
      queued = StepMetrics{};
      queued.step = step;
      queued.total_steps = c.tokens.train_steps;
      queued.learning_rate = lr;
      queued.consumed_tokens = summary.consumed_tokens;
      queued.skipped_steps = nonfinite.skipped_steps();
      if (is_logging_rank) {
        const data::DataLoaderState position = s.data->state(step);
        for (const auto& dataset : position.stages[s.data->stage_index(step)].datasets)
          queued.dataset_samples.emplace_back(dataset.folder, dataset.consumed_samples);
      }
      read_back.queue(step, at::cat({losses, norm.to(at::kFloat).reshape({1})}));
    } else {
      reporter.step_done(step, c.tokens.train_steps,
                         std::chrono::duration<double>(Clock::now() - interval_start).count() /
                             static_cast<double>(step - interval_first));
    }
    const bool due = s.checkpoint->due(step);
    // Every rank stops at the same step when any of them got a preemption signal.
    const int stop_signal = c.general.preemption_signals.empty() ? 0
        : static_cast<int>(world_reduce(s.communicator, preemption::signal_received(), TRIAX_REDUCE_MAX));
    if (due || stop_signal != 0) {
      if (read_back.pending()) report_logged_step();  // logged, and checked, before it is saved
      if (!log_now) nonfinite.check(step, losses[0], norm);  // never save a diverged model
      s.checkpoint->save(step, summary.consumed_tokens, s.resume.lr_scheduler, resolved_text);
      interval_start = Clock::now();  // the save's time is not a step's
      interval_first = step;
    }
    if (stop_signal != 0) {
      summary.preempted_by = preemption::signal_name(stop_signal);
      log::warning("preempted by " + summary.preempted_by + ": stopped after step " + std::to_string(step) +
                   " with a checkpoint in " + c.checkpoints.checkpoints_path +
                   " (resume with checkpoints.resume_checkpoint_path=" + c.checkpoints.checkpoints_path + ")");
      break;
    }
  }
  if (read_back.pending()) report_logged_step();
  summary.skipped_steps = nonfinite.skipped_steps();
  profiler.finish();
  reporter.finish({c.model.plugin, s.model->total_parameters(), device_display_name(s.device), world_size,
                   tokens_per_step});
  for (size_t i = 0; i < step_losses.size(); ++i) {
    summary.losses.push_back(step_losses[i].item<double>());
    summary.grad_norms.push_back(step_norms[i].item<double>());
  }
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!summary.losses.empty())
    log::info("done: " + std::to_string(c.tokens.train_steps) + " steps in " + format_duration(summary.seconds) +
              ", loss " + std::to_string(summary.losses.front()) + " -> " + std::to_string(summary.losses.back()) +
              "; at most " + std::to_string(summary.peak_live_micro_batches) + " of " +
              std::to_string(micro_batches * s.model->chunk_count()) +
              (s.model->chunk_count() > 1 ? " (micro-batch, model chunk) pairs" : " micro-batches") +
              " in flight on this rank (" + c.parallelism.pp_engine + ")");
  return summary;
}

}  // namespace triax
