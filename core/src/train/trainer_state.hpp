// What a Trainer holds: the plugins named by the config, the model and its step, the gradient
// path, the data and the checkpoint store. Trainer's constructor builds it stage by stage (the
// methods below, trainer_state.cpp); TrainingRun runs the loop over it.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

#include "triax/data/training_data.hpp"
#include "triax/parallel/replica_ownership.hpp"
#include "gradients/step_gradients.hpp"
#include "step/engine_step.hpp"
#include "step/micro_batch_request.hpp"
#include "step/model_chunks.hpp"
#include "step/pipeline_blocks.hpp"
#include "step/step_losses.hpp"
#include "train/qk_clip.hpp"
#include "triax/core/checkpoint/training_checkpoint.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_contexts.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/trainer.hpp"
#include "triax/report/metrics.hpp"

namespace triax {

struct TrainerState {
  TrainConfig config;
  PluginRegistry& registry;
  Communicator& communicator;
  const ExternalModelFormat* external_models;  // may be null; only while the Trainer is built
  const checkpoint::SaveStrategyChoice* save_strategies = nullptr;  // may be null; only while built
  HostServices host;
  c10::Device device = c10::Device(c10::kCPU);
  std::string device_name;
  std::unique_ptr<PluginContexts> contexts;  // the ABI contexts, filled from the config
  std::unique_ptr<ModelChunks> model;        // one instance per model chunk the engine asked for
  std::unique_ptr<OptimizerInstance> optimizer;
  std::unique_ptr<QkClip> qk_clip;  // QK-clip after each step, when the optimizer asks for it
  std::unique_ptr<EngineInstance> engine;
  std::unique_ptr<ReplicaOwnership> ownership;  // which copy of each parameter counts and is saved
  std::unique_ptr<StepLosses> step_losses;
  std::unique_ptr<StepGradients> gradients;
  std::unique_ptr<EngineStep> engine_step;
  PassRecord pass_record;  // parallelism.pp_pass_record; off until the run opens it
  std::vector<double> block_costs;           // forward FLOPs per token of each pipeline block
  std::vector<StageBlocks> pipeline_stages;  // blocks of each virtual stage (pp x model chunks)
  std::unique_ptr<data::TrainingData> data;
  std::unique_ptr<checkpoint::TrainingCheckpoint> checkpoint;
  checkpoint::ResumePoint resume;  // step 0 unless resuming
  double flops_per_token = 0.0;
  DevicePeak peak;

  TrainerState(TrainConfig c, PluginRegistry& r, Communicator& comm, const ExternalModelFormat* external)
      : config(std::move(c)), registry(r), communicator(comm), external_models(external), host(comm) {}

  // The stages of construction, in order.
  void open_data(const triax_model_vtable& model_vtable);
  void make_engine(const triax_engine_vtable& engine_vtable);
  // Returns the model's tied parameters, which StepGradients takes over in make_step.
  std::unique_ptr<TiedGradients> make_model(const triax_model_vtable& model_vtable);
  void load_weights();
  void make_optimizer(const triax_optimizer_vtable& optimizer_vtable);
  void make_step(std::unique_ptr<TiedGradients> tied);
  void create_run_folder() const;

  // The run's facts, for the loop.
  bool is_logging_rank() const { return communicator.rank(TRIAX_GROUP_WORLD) == 0; }
  int64_t tokens_per_step() const;
  // Where this rank's micro-batches go, for the step and the validation pass.
  MicroBatchPlace micro_batch_place() const;
  // The resolved configuration (every default filled in, the model plugin's own too), written to
  // the run folder by the logging rank; its text is what checkpoints store.
  std::string write_resolved_config() const;
  std::vector<std::string> describe_run() const;
};

}  // namespace triax
