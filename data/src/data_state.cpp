#include "triax/data/data_state.hpp"

namespace triax::data {

bool DataLoaderState::operator==(const DataLoaderState& other) const {
  if (completed_steps != other.completed_steps || consumed_samples != other.consumed_samples ||
      stages.size() != other.stages.size())
    return false;
  for (size_t k = 0; k < stages.size(); ++k) {
    const StagePosition& a = stages[k];
    const StagePosition& b = other.stages[k];
    if (a.name != b.name || a.consumed_samples != b.consumed_samples || a.datasets.size() != b.datasets.size())
      return false;
    for (size_t i = 0; i < a.datasets.size(); ++i) {
      const DatasetPosition& x = a.datasets[i];
      const DatasetPosition& y = b.datasets[i];
      if (x.folder != y.folder || x.samples_per_epoch != y.samples_per_epoch ||
          x.consumed_samples != y.consumed_samples || x.consumed_tokens != y.consumed_tokens || x.epoch != y.epoch)
        return false;
    }
  }
  return true;
}

}  // namespace triax::data
