#include "triax/core/checkpoint/training_checkpoint.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <chrono>
#include <functional>
#include <ctime>
#include <set>

#include "checkpoint/background_prune.hpp"
#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "triax/core/checkpoint/checkpoint_writer.hpp"
#include "triax/core/checkpoint/save_strategy.hpp"
#include "triax/parallel/zero3_pieces.hpp"
#include "comm/world_reduce.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/parallel/replica_ownership.hpp"
#include "triax/data/training_data.hpp"
#include "triax/report/log.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/report/progress.hpp"
#include "triax/torch_version.hpp"

namespace triax::checkpoint {
namespace {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

at::TensorOptions backend_options(Communicator& communicator, const c10::Device& device) {
  return std::string(communicator.backend_name()) == "nccl" ? at::TensorOptions().device(device)
                                                            : at::TensorOptions();
}

// Every stored tensor must land in some rank's model: a leftover one means the checkpoint has
// another shape (more layers, an untied head, ...). Collective over the world.
void check_nothing_left_over(const CheckpointReader& reader, const std::vector<NamedParameter>& parameters,
                             Communicator& communicator, const c10::Device& device) {
  const std::vector<std::string> stored = reader.parameter_names();
  std::set<std::string> mine;
  for (const auto& p : parameters) mine.insert(p.name);
  at::Tensor used = at::zeros({static_cast<int64_t>(stored.size())}, at::TensorOptions().dtype(at::kInt));
  for (size_t i = 0; i < stored.size(); ++i)
    if (mine.count(stored[i])) used[static_cast<int64_t>(i)] = 1;
  if (communicator.size(TRIAX_GROUP_WORLD) > 1) {
    at::Tensor shared = used.to(backend_options(communicator, device).dtype(at::kInt).device());
    communicator.all_reduce(TRIAX_GROUP_WORLD, shared, TRIAX_REDUCE_MAX);
    used = shared.cpu();
  }
  std::vector<std::string> unused;
  for (size_t i = 0; i < stored.size(); ++i)
    if (used[static_cast<int64_t>(i)].item<int>() == 0) unused.push_back(stored[i]);
  if (!unused.empty()) {
    std::string list;
    for (size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", " : "") + unused[i];
    if (unused.size() > 5) list += ", ... (" + std::to_string(unused.size()) + " in all)";
    throw CheckpointError("checkpoint " + reader.folder().string() + " holds tensors this model does not have: " +
                          list + " (a checkpoint of another model shape?)");
  }
}

// The generators a rank saves: the CPU one, and its GPU's.
std::map<std::string, at::Tensor> rng_states([[maybe_unused]] const c10::Device& device) {
  std::map<std::string, at::Tensor> states;
  states["cpu"] = at::detail::getDefaultCPUGenerator().get_state();
#ifdef TRIAX_WITH_CUDA
  if (device.is_cuda()) states["cuda"] = at::cuda::detail::getDefaultCUDAGenerator(device.index()).get_state();
#endif
  return states;
}

void restore_rng_states(const CheckpointReader& reader, int rank, [[maybe_unused]] const c10::Device& device) {
  if (auto cpu = reader.rng_state(rank, "cpu")) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(*cpu);
  }
#ifdef TRIAX_WITH_CUDA
  if (device.is_cuda())
    if (auto cuda = reader.rng_state(rank, "cuda")) {
      at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(device.index());
      generator.set_state(*cuda);
    }
#endif
}

// Fills one parameter with `fill`, which copies stored values into a shard it is given; a ZeRO-3
// shard through its whole box (the stores hold boxes, not ZeRO-3 pieces).
void fill_parameter(const NamedParameter& p, const Zero3Layout& zero3,
                    const std::function<void(const NamedParameter&)>& fill) {
  const Zero3Piece* piece = zero3.find(p.name);
  if (piece == nullptr) {
    fill(p);
    return;
  }
  const NamedParameter box = whole_box(p, *piece, p.tensor.scalar_type());
  fill(box);
  at::NoGradGuard no_grad;
  p.tensor.detach().copy_(box.tensor.reshape({-1}).narrow(0, piece->range.offset, piece->range.length));
}

// Loads every parameter from `reader` behind a progress line, then checks that no stored tensor
// is left over (collective over the world). Returns the bytes loaded into this rank.
int64_t load_weights(const CheckpointReader& reader, const std::vector<NamedParameter>& parameters,
                     const Zero3Layout& zero3, Communicator& communicator, const c10::Device& device) {
  int64_t parameter_bytes = 0;
  for (const NamedParameter& p : parameters) parameter_bytes += static_cast<int64_t>(p.tensor.nbytes());
  ProgressMeter progress("loading the weights of " + reader.folder().string(), parameter_bytes);
  for (const NamedParameter& p : parameters) {
    fill_parameter(p, zero3, [&](const NamedParameter& target) { reader.load_parameter(target); });
    progress.advance(static_cast<int64_t>(p.tensor.nbytes()));
  }
  progress.finish();
  check_nothing_left_over(reader, parameters, communicator, device);
  return parameter_bytes;
}

}  // namespace

void load_initial_weights(const std::string& path, const std::vector<NamedParameter>& parameters,
                          Communicator& communicator, const c10::Device& device, const PluginRegistry& registry,
                          const std::string& model_plugin, const ExternalModelFormat* external) {
  const Zero3Layout zero3 = zero3_layout(parameters, communicator, ReplicaGroups::of(communicator), device);
  if (external != nullptr && external->holds(path)) {
    // Without pipeline stages every rank holds every name: nothing stored may be left over.
    external->load_weights(path, parameters, registry, model_plugin, communicator.size(TRIAX_GROUP_PP) == 1,
                           [&](const NamedParameter& p, const std::function<void(const NamedParameter&)>& copy) {
                             fill_parameter(p, zero3, copy);
                           });
    return;
  }
  CheckpointReader reader(path);
  load_weights(reader, parameters, zero3, communicator, device);
  log::info("model.init_method.path: weights of step " + std::to_string(reader.metadata().step) + " from " +
            reader.folder().string());
}

TrainingCheckpoint::TrainingCheckpoint(TrainingParts parts)
    : parts_(std::move(parts)),
      zero3_(std::make_unique<const Zero3Layout>(
          zero3_layout(*parts_.parameters, *parts_.communicator, parts_.ownership->groups(), parts_.device))) {
  SaveStrategySetup setup{parts_.device, parts_.communicator->rank(TRIAX_GROUP_WORLD),
                          [this] { return rank_contents(); },
                          [this](int64_t step, const auto& conclude) { return commit(step, conclude); }};
  const CheckpointsConfig& c = parts_.config->checkpoints;
  if (parts_.save_strategies != nullptr) strategy_ = parts_.save_strategies->for_run(c, setup);
  if (!strategy_ && c.async_save)
    throw CheckpointError("checkpoints.async_save: this program was built without the asynchronous save "
                          "(triax_checkpoint_async's save strategies were not handed to the Trainer)");
  if (!strategy_) strategy_ = synchronous_save(std::move(setup));
}
TrainingCheckpoint::~TrainingCheckpoint() = default;

void TrainingCheckpoint::begin_resume() {
  const auto& path = parts_.config->checkpoints.resume_checkpoint_path;
  if (!path) return;
  resume_from_ = std::make_unique<CheckpointReader>(*path);
  const CheckpointMetadata& m = resume_from_->metadata();
  log::info("resuming from " + resume_from_->folder().string() + ": step " + std::to_string(m.step) +
            ", saved at " + m.topology.describe() + " by triax " + m.triax_version);
  const auto start = std::chrono::steady_clock::now();
  loaded_bytes_ += load_weights(*resume_from_, *parts_.parameters, *zero3_, *parts_.communicator, parts_.device);
  load_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ResumePoint TrainingCheckpoint::finish_resume() {
  const TrainConfig& c = *parts_.config;
  ResumePoint point;
  point.lr_scheduler = c.optimizer.learning_rate_scheduler;
  if (!resume_from_) return point;
  const CheckpointReader& reader = *resume_from_;
  const CheckpointMetadata& m = reader.metadata();
  point.step = m.step;
  first_step_ = m.step;
  point.consumed_tokens = m.consumed_tokens;
  if (c.checkpoints.load_lr_scheduler) point.lr_scheduler = m.lr_scheduler;

  const auto start = std::chrono::steady_clock::now();
  OptimizerInstance& optimizer = *parts_.optimizer;
  if (!c.checkpoints.load_optimizer) {
    log::warning("checkpoints.load_optimizer is false: the optimizer starts fresh (moments zero)");
  } else if (!m.has_optimizer_state) {
    log::warning("the checkpoint holds no optimizer state (optimizer plugin '" + m.optimizer_plugin +
                 "' did not list it): the optimizer starts fresh");
  } else if (!optimizer.exposes_state()) {
    log::warning("optimizer plugin '" + optimizer.name() +
                 "' does not expose its state (ABI before 1.2): the optimizer starts fresh");
  } else {
    const std::vector<NamedParameter>& params = *parts_.parameters;
    for (const OptimizerStateTensor& state : optimizer.state()) {
      const NamedParameter& live = params.at(static_cast<size_t>(state.param_index));
      // A ZeRO-3 shard's state covers a range of its box: read as the box's, from the range's start.
      const Zero3Piece* piece = zero3_->find(live.name);
      const NamedParameter p = piece != nullptr ? whole_box(live, *piece, at::kFloat) : live;
      const int64_t element_offset = state.element_offset + (piece != nullptr ? piece->range.offset : 0);
      if (state.name == "master" && !reader.has_state(p.name, "master")) {
        // Saved with fp32 parameters (their own masters): the stored parameter is the master.
        at::Tensor whole_shard = at::empty_like(p.tensor, at::TensorOptions().dtype(at::kFloat));
        reader.load_parameter({p.name, whole_shard, p.spec});
        state.tensor.copy_(whole_shard.reshape({-1}).narrow(0, element_offset, state.tensor.numel()));
        continue;
      }
      reader.load_state(p, state.name, state.tensor, state.per_parameter ? 0 : element_offset, state.per_parameter);
      loaded_bytes_ += static_cast<int64_t>(state.tensor.nbytes());
    }
    optimizer.state_loaded();
  }
  load_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gigabytes = static_cast<double>(loaded_bytes_) / 1e9;
  log::info("checkpoint: loaded " + std::to_string(gigabytes) + " GB into this rank in " +
            std::to_string(load_seconds_) + " s (" + std::to_string(load_seconds_ > 0 ? gigabytes / load_seconds_ : 0.0) +
            " GB/s)");

  parts_.data->restore(m.data);
  const Topology now{c.parallelism.dp, c.parallelism.tp, c.parallelism.pp, c.optimizer.zero_stage,
                     c.parallelism.context_parallel_size};
  if (now == m.topology)
    restore_rng_states(reader, parts_.communicator->rank(TRIAX_GROUP_WORLD), parts_.device);
  else
    log::info("resharded from " + m.topology.describe() + " to " + now.describe() +
              "; random generators start from the seed");
  resume_from_.reset();
  return point;
}

void TrainingCheckpoint::prepare_saves() { strategy_->prepare(); }

bool TrainingCheckpoint::due(int64_t step) const {
  const CheckpointsConfig& c = parts_.config->checkpoints;
  if (step == 0) return c.save_initial_state;
  if (c.checkpoint_interval > 0 && step % c.checkpoint_interval == 0) return true;
  return step == parts_.config->tokens.train_steps && (c.checkpoint_interval > 0 || c.save_final_state);
}

RankContents TrainingCheckpoint::rank_contents() const {
  const bool sharded_optimizer = parts_.optimizer->gradient_sharding() != TRIAX_GRADIENTS_WHOLE;
  // One copy of everything, from the owner of its replicas (rank 0 of its dp or edp group, tp
  // rank 0, the lowest stage of a tie); ZeRO state from every rank of the group, each its piece.
  const ReplicaOwnership& owner = *parts_.ownership;
  RankContents contents;
  for (const NamedParameter& p : *parts_.parameters) {
    const Zero3Piece* piece = zero3_->find(p.name);
    if (piece != nullptr) contents.element_ranges[p.name] = {piece->box_shape, piece->range.offset};
    if (piece != nullptr && piece->range.length == 0) continue;  // the last ranks' shards may be empty
    // A ZeRO-3 parameter is stored as ZeRO state is: every rank of its group its own piece.
    if (piece != nullptr ? owner.owns_piece(p.spec) : owner.owns_copy(p.spec)) contents.parameters.push_back(&p);
  }
  if (parts_.optimizer->exposes_state())
    for (const OptimizerStateTensor& state : parts_.optimizer->state()) {
      const NamedParameter& p = parts_.parameters->at(static_cast<size_t>(state.param_index));
      const Zero3Piece* piece = zero3_->find(p.name);
      const int64_t element_offset =
          state.element_offset + (piece != nullptr && !state.per_parameter ? piece->range.offset : 0);
      if (sharded_optimizer ? owner.owns_piece(p.spec) : owner.owns_copy(p.spec))
        contents.optimizer_state.push_back({&p, state.name, state.tensor, element_offset, state.per_parameter});
    }
  contents.rng_states = rng_states(parts_.device);
  return contents;
}

CheckpointMetadata TrainingCheckpoint::metadata_of(int64_t step, int64_t consumed_tokens,
                                                   const LrSchedulerConfig& lr_scheduler) const {
  const TrainConfig& c = *parts_.config;
  CheckpointMetadata m;
  m.step = step;
  m.consumed_tokens = consumed_tokens;
  m.topology = {c.parallelism.dp, c.parallelism.tp, c.parallelism.pp, c.optimizer.zero_stage,
                c.parallelism.context_parallel_size};
  m.model_plugin = parts_.model_plugin;
  m.model_dtype = c.model.dtype;
  m.optimizer_plugin = parts_.optimizer->name();
  m.has_optimizer_state = parts_.optimizer->exposes_state();
  m.triax_version = TRIAX_VERSION;
  m.torch_version = TRIAX_TORCH_VERSION_STRING;
  m.saved_at = utc_now();
  m.lr_scheduler = lr_scheduler;
  m.data = parts_.data->state(step);
  for (int r = 0; r < parts_.communicator->size(TRIAX_GROUP_WORLD); ++r) m.files.push_back(rank_file_name(r));
  return m;
}

void TrainingCheckpoint::save(int64_t step, int64_t consumed_tokens, const LrSchedulerConfig& lr_scheduler,
                              const std::string& resolved_config) {
  CheckpointWriter writer(parts_.config->checkpoints.checkpoints_path, *parts_.communicator);
  strategy_->commit_in_flight();  // at most one save in flight
  strategy_->save({std::move(writer), metadata_of(step, consumed_tokens, lr_scheduler), resolved_config,
                   step > first_step_});
}

SaveResult TrainingCheckpoint::commit(int64_t step, const std::function<SaveResult()>& conclude) {
  wait_for_pruning();  // never beside a commit
  const SaveResult result = conclude();
  start_pruning(step);
  return result;
}

void TrainingCheckpoint::before_optimizer_step() { strategy_->before_optimizer_step(); }

void TrainingCheckpoint::complete_if_written() {
  if (!strategy_->in_flight()) return;
  if (world_reduce(*parts_.communicator, strategy_->written() ? 1 : 0, TRIAX_REDUCE_MIN) == 1)
    strategy_->commit_in_flight();
}

bool TrainingCheckpoint::take_save_cost(SaveCost& cost) { return strategy_->take_cost(cost); }

void TrainingCheckpoint::finish_saves() {
  strategy_->commit_in_flight();
  wait_for_pruning();
}

void TrainingCheckpoint::start_pruning(int64_t step) {
  if (parts_.communicator->rank(TRIAX_GROUP_WORLD) != 0) return;  // rank 0 commits, and prunes
  const CheckpointsConfig& c = parts_.config->checkpoints;
  pruning_ = std::make_unique<BackgroundPrune>(c.checkpoints_path, c.keep_last, step);
}

void TrainingCheckpoint::wait_for_pruning() {
  if (!pruning_) return;
  const double waited = pruning_->wait();
  pruning_.reset();
  if (waited > 0.01)  // a wait worth a line: the removal outlasted the steps since the commit
    log::info("checkpoint: waited " + std::to_string(waited) + " s for the removal of old checkpoints");
}

}  // namespace triax::checkpoint
