#include "sources/validation_source.hpp"

namespace triax::data {

ValidationSource::ValidationSource(std::unique_ptr<ValidationSamples> samples, bool document_positions,
                                   bool held_out)
    : samples_(std::move(samples)), document_positions_(document_positions), held_out_(held_out) {}

void ValidationSource::fill(int64_t first, int64_t count, int64_t* out) {
  samples_->fill(first, count, out, document_positions_);
}

std::vector<std::string> ValidationSource::describe() const {
  return {"  validation: " + std::to_string(samples_->size()) + " samples (" +
          (held_out_ ? "held out of the folders above, never trained on"
                     : std::to_string(samples_->part_count()) + " folder(s) of their own") +
          ")"};
}

}  // namespace triax::data
