// Feeds an engine (or the validation pass) micro-batches: consecutive rows of this rank's samples,
// each row sequence_length + 1 tokens, cut into input ids and the next-token labels.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "triax/abi.h"

namespace triax {

struct MicroBatchFeed {
  at::Tensor samples;  // [micro-batches * micro_batch_size, sequence_length + 1]
  int64_t micro_batch_size = 0;
  c10::Device device = c10::Device(c10::kCPU);
  int rank = 0;
  int64_t step = 0;
  bool inject_faults = true;  // a training step's forward fault points (off for validation)

  // triax_micro_batch_source.next: micro-batch `index` into io (new references).
  static triax_status next(void* self, int32_t index, triax_stage_io* io, triax_error* error);
  // Targets that count in micro-batch `index`'s loss: all of them (no label mask is given).
  int64_t counted_tokens(int32_t index) const;
  // The fault points of a micro-batch's forward (injected by tests: fault_injection.hpp).
  static void forward_faults(int rank, int64_t step);
};

}  // namespace triax
