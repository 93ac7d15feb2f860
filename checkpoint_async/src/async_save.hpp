// checkpoints.async_save: a save that copies this rank's pieces into host memory (HostSnapshot:
// staged in spare device memory on a GPU), returns to the training, and writes the rank's file
// on a background thread (BackgroundSave). The save becomes `latest` through the core's commit at
// the first step boundary where every rank's file is written, or before the next save.
#pragma once

#include <memory>

#include "background_save.hpp"
#include "host_snapshot.hpp"
#include "save_strategy_entry.hpp"
#include "triax/core/checkpoint/save_strategy.hpp"

namespace triax {
struct SaveCost;
}

namespace triax::checkpoint {

class AsyncSave : public SaveStrategy {
 public:
  explicit AsyncSave(SaveStrategySetup setup);
  ~AsyncSave() override;

  // Allocates the host memory of the saves' copies now, before the steps.
  void prepare() override;
  void save(SaveRequest request) override;
  // The device's next optimizer step waits for the save's copies.
  void before_optimizer_step() override;
  bool in_flight() const override { return in_flight_ != nullptr; }
  bool written() const override { return in_flight_ == nullptr || in_flight_->written(); }
  void commit_in_flight() override;
  bool take_cost(SaveCost& cost) override;

 private:
  // What the committed save cost the training, and its log line.
  void record_cost(const BackgroundSave& save, const SaveResult& result);

  SaveStrategySetup setup_;
  std::unique_ptr<HostSnapshot> snapshot_;     // created by prepare (or the first save)
  std::unique_ptr<BackgroundSave> in_flight_;  // at most one
  double snapshot_seconds_ = 0.0;              // the stall of the save in flight's step
  std::unique_ptr<SaveCost> cost_;             // the last committed save's, until taken
};

// Its line in the registry (save_strategy_registry.cpp).
SaveStrategyEntry async_save_strategy();

}  // namespace triax::checkpoint
