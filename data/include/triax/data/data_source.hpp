// A source of samples for a data stage: the synthetic stream, a mixture of token folders, a
// stage's validation samples. TrainingData numbers the samples of a run and asks each stage's
// source for its share; a source knows nothing of steps, ranks or stages.
//
// Sample n of a source is a pure function of (config, n), so that every rank can build any sample
// and a resumed run continues with exactly the next ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "triax/data/data_state.hpp"

namespace triax::data {

class DataSource {
 public:
  // size() of a source whose samples never run out (a stream, or datasets read in epochs).
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

  virtual ~DataSource() = default;

  // How many samples it holds (kUnbounded: fill accepts any number).
  virtual int64_t size() const = 0;
  // Samples [first, first + count) into `out`, one row each (BatchLayout::row_size). Called from
  // the loader thread and the main thread alike.
  virtual void fill(int64_t first, int64_t count, int64_t* out) = 0;
  // Lines for the start of the log: the first follows the stage's name, the others stand alone.
  virtual std::vector<std::string> describe() const = 0;

  // Where each of its datasets stands once the first `consumed` samples were used: what a
  // checkpoint keeps of it (empty for a source whose position is `consumed` alone).
  virtual std::vector<DatasetPosition> position(int64_t consumed) = 0;
  // Continues from a checkpoint's position after `consumed` samples; throws Error beginning with
  // `what` when the checkpoint's datasets are not this source's.
  virtual void restore(int64_t consumed, const std::vector<DatasetPosition>& datasets, const std::string& what) = 0;
  // What the consumption line of the log adds about each dataset of position(consumed).
  virtual std::string describe_consumption(const std::vector<DatasetPosition>& datasets, int64_t consumed) const;
};

// The sources of one data stage: what it trains on, and what it validates on (null: none).
struct StageSources {
  std::unique_ptr<DataSource> training;
  std::unique_ptr<DataSource> validation;  // may read the training source's files: destroyed first
};

// Refuses a checkpoint whose stage mixes another number of datasets than the config's.
void check_dataset_count(const std::string& what, const std::string& stage, size_t saved, size_t configured);

}  // namespace triax::data
