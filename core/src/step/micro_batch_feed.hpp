// Feeds an engine (or the validation pass) micro-batches: consecutive rows of this rank's samples,
// each row sequence_length + 1 tokens, cut into input ids and the next-token labels. With context
// parallelism each cp rank gets its two chunks of every row (context_parallel_slice.hpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "triax/abi.h"

namespace triax {

struct MicroBatchFeed {
  // [micro-batches * micro_batch_size, sequence_length + 1] tokens, or with document positions
  // [micro-batches * micro_batch_size, 2, sequence_length + 1] (TrainingData::step_samples).
  at::Tensor samples;
  int64_t micro_batch_size = 0;
  c10::Device device = c10::Device(c10::kCPU);
  int rank = 0;
  int64_t step = 0;
  bool inject_faults = true;  // a training step's forward fault points (off for validation)
  int cp_rank = 0, cp_size = 1;  // this rank's place in the cp group

  // triax_micro_batch_source.next: micro-batch `index` into io (new references).
  static triax_status next(void* self, int32_t index, triax_stage_io* io, triax_error* error);
  // Targets that count in micro-batch `index`'s loss: all of them, or with document positions
  // those that do not start the next document; of the whole rows, every cp rank's slices.
  int64_t counted_tokens(int32_t index) const;
  // The fault points of a micro-batch's forward (injected by tests: fault_injection.hpp).
  static void forward_faults(int rank, int64_t step);

 private:
  at::Tensor micro_batch(int32_t index) const;
  // As nanotron's collator: the inputs' positions, and no loss on the label that starts the next
  // document (the prediction made from a document's last token).
  static void pass_document_positions(const at::Tensor& positions, int64_t length, triax_stage_io* io);
  // Keeps this cp rank's chunks of every tensor of io, and gives each token its position.
  void keep_context_parallel_slice(int64_t length, triax_stage_io* io) const;
  static at::Tensor document_label_mask(const at::Tensor& positions, int64_t length);
};

}  // namespace triax
