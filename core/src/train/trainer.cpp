// Building a Trainer: every stage checks what it reads before any training work, and the run
// folder is created last, so that a refused run leaves nothing behind.
#include <ATen/ATen.h>

#include "train/trainer_state.hpp"
#include "train/training_run.hpp"
#include "triax/device/device.hpp"
#include "triax/core/plugins/plugin_choice.hpp"
#include "triax/core/plugins/plugin_registry.hpp"

namespace triax {

Trainer::Trainer(TrainConfig config, PluginRegistry& registry, Communicator& communicator,
                 const ExternalModelFormat* external_models, const checkpoint::SaveStrategyChoice* save_strategies)
    : state_(std::make_unique<TrainerState>(std::move(config), registry, communicator, external_models)) {
  state_->save_strategies = save_strategies;
  TrainerState& s = *state_;
  const TrainConfig& c = s.config;
  validate_for_world(c, communicator.size(TRIAX_GROUP_WORLD));
  s.device = resolve_device(c.general.device, communicator.gpu_index());
  s.device_name = s.device.str();

  // Plugins named by the config, each refused with the file, the key and the available names if
  // unknown; the model plugin chosen by its marker or a Hugging Face folder's architecture where
  // the config names none.
  const PluginChoice plugins = choose_plugins(s.config, registry, external_models);
  s.contexts = std::make_unique<PluginContexts>(c, RankPlace::of(communicator), s.host);
  s.open_data(*plugins.model);
  at::manual_seed(static_cast<uint64_t>(c.general.seed));
  s.make_engine(*plugins.engine);  // first: it says how many model chunks it wants on each pipeline rank
  std::unique_ptr<TiedGradients> tied = s.make_model(*plugins.model);
  s.load_weights();
  s.make_optimizer(*plugins.optimizer);
  s.checkpoint->set_optimizer(s.optimizer.get());
  s.resume = s.checkpoint->finish_resume();
  s.checkpoint->prepare_saves();
  s.make_step(std::move(tied));
  s.peak = device_peak(device_display_name(s.device), c.logging.peak_tflops);
  s.create_run_folder();
}

Trainer::~Trainer() = default;

const std::vector<NamedParameter>& Trainer::parameters() const { return state_->model->parameters(); }
const TrainConfig& Trainer::config() const { return state_->config; }

TrainSummary Trainer::train() { return TrainingRun(*state_).run(); }

}  // namespace triax
