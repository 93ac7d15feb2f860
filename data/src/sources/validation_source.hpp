// A stage's validation samples (ValidationSamples: held out of its training folders, or folders of
// their own) as a data source. They are the same at every validation, so nothing of them is saved.
#pragma once

#include <memory>

#include "triax/data/data_source.hpp"
#include "triax/data/validation_samples.hpp"

namespace triax::data {

class ValidationSource : public DataSource {
 public:
  // `held_out`: the samples come from the training folders (for the log's line).
  ValidationSource(std::unique_ptr<ValidationSamples> samples, bool document_positions, bool held_out);

  int64_t size() const override { return samples_->size(); }
  void fill(int64_t first, int64_t count, int64_t* out) override;
  std::vector<std::string> describe() const override;
  std::vector<DatasetPosition> position(int64_t) override { return {}; }
  void restore(int64_t, const std::vector<DatasetPosition>&, const std::string&) override {}

 private:
  std::unique_ptr<ValidationSamples> samples_;
  bool document_positions_;
  bool held_out_;
};

}  // namespace triax::data
