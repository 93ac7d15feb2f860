// One save strategy of the registry: when a run's checkpoints section asks for it, and how it is
// made. A new strategy is one file that defines its entry and one line in save_strategy_registry.cpp.
#pragma once

#include <memory>
#include <vector>

#include "triax/core/checkpoint/save_strategy.hpp"

namespace triax::checkpoint {

struct SaveStrategyEntry {
  bool (*asked_for)(const CheckpointsConfig& checkpoints) = nullptr;
  std::unique_ptr<SaveStrategy> (*make)(SaveStrategySetup setup) = nullptr;
};

// Every strategy besides the core's synchronous save, the first asked for winning.
const std::vector<SaveStrategyEntry>& registered_save_strategies();

}  // namespace triax::checkpoint
