// How a rank's pieces reach its checkpoint file. The store (TrainingCheckpoint) owns the folder,
// metadata, the writer of a rank's file and the collective commit that makes a step `latest`; a
// save strategy decides when and from where the writer gets the pieces: at once on the training
// thread (synchronous_save), from a host copy on a background thread (checkpoints.async_save:
// triax/checkpoint_async/), or from elsewhere; always through that commit.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <string>

#include "triax/config/train_config.hpp"
#include "triax/core/checkpoint/checkpoint_writer.hpp"

namespace triax {
struct SaveCost;  // triax/report/metrics.hpp
}

namespace triax::checkpoint {

// The core's commit of a step (collective): `conclude` (CheckpointWriter::save or conclude) runs
// never beside the removal of old checkpoints, which starts after it.
using CommitSave = std::function<SaveResult(int64_t step, const std::function<SaveResult()>& conclude)>;

struct SaveStrategySetup {
  c10::Device device = c10::Device(c10::kCPU);
  int world_rank = 0;
  std::function<RankContents()> live_contents;  // what this rank stores, pointing at the live tensors
  CommitSave commit;
};

// One save (no other of the strategy's is in flight).
struct SaveRequest {
  CheckpointWriter writer;
  CheckpointMetadata metadata;
  const std::string& resolved_config;
  bool after_a_step = false;  // a step ran in this process before it (the device's peak is the training's)
};

class SaveStrategy {
 public:
  virtual ~SaveStrategy() = default;
  // Before the first step, once the optimizer exists: memory the saves need, allocated ahead.
  virtual void prepare() {}
  // Collective. Returns once the training may change the live tensors: the save committed, or in
  // flight until commit_in_flight.
  virtual void save(SaveRequest request) = 0;
  // Before each optimizer step, which must not change what a save in flight still reads.
  virtual void before_optimizer_step() {}
  virtual bool in_flight() const { return false; }
  virtual bool written() const { return true; }  // this rank's file of the save in flight (or its failure)
  // Collective: waits for the save in flight, if any, and commits it through setup.commit. Throws
  // CheckpointError when a rank's write failed.
  virtual void commit_in_flight() {}
  // What the last committed save cost the training, once; false when nothing new is known.
  virtual bool take_cost(SaveCost&) { return false; }
};

// The core's strategy: this rank's file written from the live tensors on the training thread, then
// the commit, before the next step.
std::unique_ptr<SaveStrategy> synchronous_save(SaveStrategySetup setup);

// Picks a run's strategy; handed to the Trainer from above (triax/checkpoint_async/save_strategies.hpp).
class SaveStrategyChoice {
 public:
  virtual ~SaveStrategyChoice() = default;
  // The strategy the section asks for, or null for the core's synchronous save.
  virtual std::unique_ptr<SaveStrategy> for_run(const CheckpointsConfig& checkpoints,
                                                SaveStrategySetup setup) const = 0;
};

}  // namespace triax::checkpoint
