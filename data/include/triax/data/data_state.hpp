// Where the training data stands after a number of completed steps: what a checkpoint stores so
// that a resumed run continues with exactly the next samples (TrainingData::restore).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace triax::data {

struct DatasetPosition {
  std::string folder;
  int64_t samples_per_epoch = 0;  // to notice a dataset that changed since the checkpoint
  int64_t consumed_samples = 0;   // by all data-parallel ranks together
  int64_t consumed_tokens = 0;    // consumed_samples * sequence_length
  int64_t epoch = 1;              // of the last sample consumed, from 1 (2 once the first wraps)
};

struct StagePosition {
  std::string name;
  int64_t consumed_samples = 0;
  std::vector<DatasetPosition> datasets;  // empty for the synthetic stream
};

struct DataLoaderState {
  int64_t completed_steps = 0;
  int64_t consumed_samples = 0;  // over all stages
  std::vector<StagePosition> stages;

  bool operator==(const DataLoaderState& other) const;
};

}  // namespace triax::data
