// The trainer's side of checkpoints: decides when to save, gathers what this rank stores (which
// rank stores which piece: docs/checkpoint-format.md) and restores a run from a checkpoint at any
// topology — parameters first (before the optimizer copies them into fp32 masters), then
// optimizer state, learning-rate schedule, data position and, on the same topology, RNG states.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "triax/core/checkpoint/checkpoint_reader.hpp"
#include "triax/config/train_config.hpp"
#include "triax/core/plugins/external_model_format.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/parameter.hpp"

namespace triax {
class Communicator;
class OptimizerInstance;
class ReplicaOwnership;
struct SaveCost;  // triax/report/metrics.hpp
struct Zero3Layout;
namespace data {
class TrainingData;
}
}  // namespace triax

namespace triax::checkpoint {

class BackgroundPrune;
class SaveStrategy;
class SaveStrategyChoice;
struct SaveResult;
struct RankContents;

// Where a resumed run continues.
struct ResumePoint {
  int64_t step = 0;             // steps already done
  int64_t consumed_tokens = 0;
  LrSchedulerConfig lr_scheduler;  // the saved schedule (load_lr_scheduler) or the config's
};

struct TrainingParts {
  const TrainConfig* config = nullptr;
  Communicator* communicator = nullptr;
  const std::vector<NamedParameter>* parameters = nullptr;
  OptimizerInstance* optimizer = nullptr;
  data::TrainingData* data = nullptr;
  // Which copy of each parameter this rank stores (the owner of its replicas).
  const ReplicaOwnership* ownership = nullptr;
  c10::Device device = c10::Device(c10::kCPU);
  std::string model_plugin;
  // The strategies besides the synchronous save (checkpoints.async_save); may be null.
  const SaveStrategyChoice* save_strategies = nullptr;
};

// Copies a checkpoint's (or a folder `external` holds: a Hugging Face folder) weights into
// `parameters`: the weights only, for model.init_method.path. Collective over the world (checks no
// stored tensor is left over). An external folder is read with the mapping of `model_plugin`.
void load_initial_weights(const std::string& path, const std::vector<NamedParameter>& parameters,
                          Communicator& communicator, const c10::Device& device, const PluginRegistry& registry,
                          const std::string& model_plugin, const ExternalModelFormat* external);

class TrainingCheckpoint {
 public:
  // Collective over the tp and ep groups (where ZeRO-3 shards lie).
  explicit TrainingCheckpoint(TrainingParts parts);
  ~TrainingCheckpoint();

  // Resuming (checkpoints.resume_checkpoint_path): opens the checkpoint and loads the parameters.
  // Call before the optimizer is created; nothing happens without a resume path.
  void begin_resume();
  void set_optimizer(OptimizerInstance* optimizer) { parts_.optimizer = optimizer; }
  // After the optimizer exists (set_optimizer): its state, then the data position and RNG states.
  // Returns where to continue (step 0 and the config's schedule when not resuming).
  ResumePoint finish_resume();

  // What the save strategy needs (checkpoints.async_save: the host memory of the saves' copies),
  // allocated now, before the steps. Call after the optimizer exists.
  void prepare_saves();

  // Whether step `step` (1-based; 0 = before training) is saved under the config's rules.
  bool due(int64_t step) const;
  // Saves after `step` steps, through the save strategy, after committing the save in flight.
  // Collective over the world. With checkpoints.async_save it returns once this rank's pieces are
  // copied to host memory.
  void save(int64_t step, int64_t consumed_tokens, const LrSchedulerConfig& lr_scheduler,
            const std::string& resolved_config);
  // A save in flight may still read the parameters this step changes (checkpoints.async_save).
  void before_optimizer_step();
  // Collective while a save is in flight: commits it when every rank has written its file.
  void complete_if_written();
  // Collective: commits the save in flight, waiting for it (CheckpointError when a rank's write
  // failed), then waits for the removal of old checkpoints that follows a commit (end of run, preemption).
  void finish_saves();
  // What the last committed save cost, into `cost`, once (for the next logged step's metrics);
  // false when the strategy has nothing new (a synchronous save never has).
  bool take_save_cost(SaveCost& cost);

 private:
  RankContents rank_contents() const;  // what this rank stores, pointing at the live tensors
  CheckpointMetadata metadata_of(int64_t step, int64_t consumed_tokens, const LrSchedulerConfig& lr_scheduler) const;
  // The commit of every strategy's saves: conclude, between the removals of old checkpoints.
  SaveResult commit(int64_t step, const std::function<SaveResult()>& conclude);
  // Rank 0, after a commit: keep_last's removals on another thread (BackgroundPrune).
  void start_pruning(int64_t step);
  // Waits for the removal started by the last commit, if any (before the next commit).
  void wait_for_pruning();

  TrainingParts parts_;
  std::unique_ptr<const Zero3Layout> zero3_;  // where ZeRO-3 shards lie in their boxes
  std::unique_ptr<CheckpointReader> resume_from_;
  std::unique_ptr<SaveStrategy> strategy_;        // how this rank's pieces reach its file
  std::unique_ptr<BackgroundPrune> pruning_;      // rank 0: the removal after the last commit
  int64_t first_step_ = 0;                        // the step this process started after
  int64_t loaded_bytes_ = 0;  // into this rank's live tensors, for the logged throughput
  double load_seconds_ = 0.0;
};

}  // namespace triax::checkpoint
