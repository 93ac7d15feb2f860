#include "async_save.hpp"
#include "save_strategy_entry.hpp"
#include "triax/checkpoint_async/save_strategies.hpp"

namespace triax::checkpoint {

const std::vector<SaveStrategyEntry>& registered_save_strategies() {
  static const std::vector<SaveStrategyEntry> strategies{async_save_strategy()};
  return strategies;
}

std::unique_ptr<SaveStrategy> RegisteredSaveStrategies::for_run(const CheckpointsConfig& checkpoints,
                                                                SaveStrategySetup setup) const {
  for (const SaveStrategyEntry& strategy : registered_save_strategies())
    if (strategy.asked_for(checkpoints)) return strategy.make(std::move(setup));
  return nullptr;
}

}  // namespace triax::checkpoint
