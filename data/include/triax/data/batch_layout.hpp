// How a step's samples are laid out: the sample length, the batch shape and this rank's place among
// the data-parallel replicas (TrainingData numbers the samples from it).
#pragma once

#include <cstdint>

namespace triax::data {

struct BatchLayout {
  int64_t sequence_length = 0;
  int64_t micro_batch_size = 0;
  int64_t micro_batches = 1;  // batch_accumulation_per_replica
  int64_t dp_rank = 0;
  int64_t dp_size = 1;
  // model.model_config._use_doc_masking: each sample carries its tokens' document positions.
  bool document_positions = false;

  int64_t samples_per_step() const { return micro_batch_size * micro_batches * dp_size; }
  int64_t rank_samples_per_step() const { return micro_batch_size * micro_batches; }
  // int64 values per sample: its sequence_length + 1 tokens, then as many positions if asked.
  int64_t row_size() const { return (sequence_length + 1) * (document_positions ? 2 : 1); }
};

}  // namespace triax::data
