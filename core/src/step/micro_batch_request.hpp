// One pass's micro-batches and the engine request that reads them, set up alike for a training
// step (EngineStep) and a validation pass (Validation): the feed over this rank's samples and a
// triax_step_request naming the model chunks and the feed.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "step/micro_batch_feed.hpp"
#include "step/model_chunks.hpp"
#include "triax/abi.h"

namespace triax {

// Where this rank's micro-batches go; the same for every pass of a run.
struct MicroBatchPlace {
  c10::Device device = c10::Device(c10::kCPU);
  int rank = 0;                  // this rank in the world, for fault injection
  int cp_rank = 0, cp_size = 1;  // which slices of the sequences this rank works on
  int64_t micro_batch_size = 0;
};

// The request points at the feed, so the two live together and are neither copied nor moved.
// The request's hooks are left empty for the caller.
class MicroBatchRequest {
 public:
  // `samples`: [micro_batches * micro_batch_size, ...] rows of step `step` (MicroBatchFeed).
  MicroBatchRequest(const MicroBatchPlace& place, const ModelChunks& model, at::Tensor samples, int64_t step,
                    int64_t micro_batches);
  MicroBatchRequest(const MicroBatchRequest&) = delete;
  MicroBatchRequest& operator=(const MicroBatchRequest&) = delete;

  MicroBatchFeed& feed() { return feed_; }
  triax_step_request& request() { return request_; }

 private:
  MicroBatchFeed feed_;
  triax_step_request request_{};
};

}  // namespace triax
