// The training loop: builds the model, optimizer and engine plugins named by the config,
// then for each step zeroes gradients, lets the engine run every micro-batch forward and
// backward, clips by the global norm, steps the optimizer at the scheduled learning rate and
// logs metrics. The only host synchronisation inside a step is reading the logged loss (and, with
// general.nonfinite_policy: skip, the loss and norm of every step; docs/reliability.md).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "triax/config/train_config.hpp"
#include "triax/parameter.hpp"

namespace triax {

class Communicator;
class ExternalModelFormat;
class PluginRegistry;
struct TrainerState;
namespace checkpoint {
class SaveStrategyChoice;
}

struct TrainSummary {
  std::vector<double> losses;      // every step's mean LM loss
  std::vector<double> grad_norms;  // every step's norm before clipping
  std::vector<double> learning_rates;
  int64_t consumed_tokens = 0;
  double seconds = 0.0;
  int peak_live_micro_batches = 0;  // on this rank, over all steps, as the engine measured it
  int64_t skipped_steps = 0;        // non-finite steps skipped (general.nonfinite_policy: skip)
  std::string preempted_by;         // the signal that stopped the run early ("SIGTERM"), if one did
  // (step, validation loss) of every validation (tokens.val_check_interval), in order.
  std::vector<std::pair<int64_t, double>> validation_losses;
};

class Trainer {
 public:
  // Builds everything; configuration and plugin errors surface here, before any step.
  // `external_models`: the folder format besides checkpoints that model.init_method.path may name
  // (a Hugging Face folder: triax/convert/hf_model_format.hpp), used while the Trainer is built;
  // without it the path is a checkpoint's and the model's memory is not checked beforehand.
  // `save_strategies`: the saves besides the synchronous one (checkpoints.async_save:
  // triax/checkpoint_async/save_strategies.hpp); without them such a config is refused.
  Trainer(TrainConfig config, PluginRegistry& registry, Communicator& communicator,
          const ExternalModelFormat* external_models = nullptr,
          const checkpoint::SaveStrategyChoice* save_strategies = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  TrainSummary train();

  // This rank's parameters (live tensors).
  const std::vector<NamedParameter>& parameters() const;
  const TrainConfig& config() const;

 private:
  std::unique_ptr<TrainerState> state_;
};

}  // namespace triax
