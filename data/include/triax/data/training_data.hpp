// The data of a whole run: its data stages (each reading the data source it names, see
// source_registry.hpp), the global sample numbering, background prefetching, consumption logs and the checkpointable
// position.
//
// Samples are numbered globally over the run: step s (from 1) uses samples
// [(s - 1) * S, s * S) with S = micro_batch_size * micro_batches * dp; the rank with dp_rank r
// takes micro-batch m as samples (s - 1) * S + r * micro_batches * micro_batch_size +
// m * micro_batch_size + [0, micro_batch_size). A stage starting at step k numbers its own
// samples from (k - 1) * S. A sample is a pure function of its number, so data-parallel ranks
// read disjoint samples and a resumed run continues with exactly the next ones.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "triax/config/train_config.hpp"
#include "triax/data/batch_layout.hpp"
#include "triax/data/data_state.hpp"

namespace triax::data {

class BatchPrefetcher;

class TrainingData {
 public:
  // Opens and checks every stage's data before any training (ConfigError naming the config file,
  // the key and, for bad files, the file). `pin_memory`: batches in page-locked memory, for
  // asynchronous copies to a GPU.
  TrainingData(const TrainConfig& config, int64_t vocab_size, const BatchLayout& layout, bool pin_memory = false);
  ~TrainingData();

  // Samples [first, first + count) by global number: [count, sequence_length + 1] int64 (with
  // document positions [count, 2, sequence_length + 1]).
  at::Tensor samples(int64_t first, int64_t count);
  // This rank's samples of `step`, its micro-batches one after the other:
  // [micro_batches * micro_batch_size, sequence_length + 1], or with document positions
  // [micro_batches * micro_batch_size, 2, sequence_length + 1] (tokens, then positions: one
  // buffer, one copy to the device). Prefetched: built while the
  // previous step ran; the next step's build starts now. Logs a stage switch.
  at::Tensor step_samples(int64_t step);
  // This rank's validation samples when validating after `step`, `micro_batches` micro-batches
  // one after the other: validation samples [dp_rank * rows, (dp_rank + 1) * rows) of the stage
  // `step` belongs to, rows = micro_batches * micro_batch_size; the same at every validation.
  at::Tensor validation_samples(int64_t step, int64_t micro_batches);
  // After step `step`: logs datasets that wrapped into a new epoch, and each dataset's consumed
  // samples and tokens every `consumption_log_interval` steps and at the last step.
  void after_step(int64_t step);
  void log_consumption(int64_t step);

  // The position after `completed_steps` steps (a pure function of it, for checkpoints).
  DataLoaderState state(int64_t completed_steps);
  // Continues from a checkpoint's position: checks it against this config (stages, folders,
  // dataset sizes, weights) and makes locating the next samples immediate.
  void restore(const DataLoaderState& state);

  // One line per stage, for the start of the log.
  std::vector<std::string> describe() const;
  // The stage `step` belongs to (index into the config's data_stages).
  size_t stage_index(int64_t step) const;
  // Seconds the trainer waited for a batch: 0 when loading never stalled a step.
  double waited_seconds() const;

  static constexpr int64_t kConsumptionLogInterval = 100;

 private:
  struct Stage;
  void fill(int64_t first, int64_t count, int64_t* out);
  void check_validation_size(const Stage& stage, size_t index, const TrainConfig& config) const;
  at::Tensor empty_batch(int64_t rows) const;
  StagePosition stage_position(size_t stage, int64_t completed_steps);

  BatchLayout layout_;
  int64_t train_steps_;
  bool pin_memory_;
  std::string origin_;
  std::vector<std::unique_ptr<Stage>> stages_;
  std::unique_ptr<BatchPrefetcher> prefetcher_;
  size_t logged_stage_ = SIZE_MAX;
  std::vector<std::vector<int64_t>> logged_epochs_;  // per stage, per dataset
};

}  // namespace triax::data
