// The save strategies beside the core's synchronous save (checkpoints.async_save), as the core's
// SaveStrategyChoice that apps/ hands to the Trainer.
#pragma once

#include "triax/core/checkpoint/save_strategy.hpp"

namespace triax::checkpoint {

class RegisteredSaveStrategies : public SaveStrategyChoice {
 public:
  std::unique_ptr<SaveStrategy> for_run(const CheckpointsConfig& checkpoints, SaveStrategySetup setup) const override;
};

}  // namespace triax::checkpoint
