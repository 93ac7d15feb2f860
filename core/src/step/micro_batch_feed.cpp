#include "step/micro_batch_feed.hpp"

#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "faults/fault_injection.hpp"
#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {

void MicroBatchFeed::forward_faults(int rank, int64_t step) {
  fault::kill_if_armed("forward", rank, step);
  if (fault::armed("error", rank, step)) throw Error("TRIAX_FAULT: an injected error at step " + std::to_string(step));
  if (fault::armed("slow_forward", rank, step)) std::this_thread::sleep_for(fault::kSlowForwardDelay);
}

triax_status MicroBatchFeed::next(void* self, int32_t index, triax_stage_io* io, triax_error* error) {
  auto* feed = static_cast<MicroBatchFeed*>(self);
  try {
    if (feed->inject_faults) forward_faults(feed->rank, feed->step);  // the engine asks for a micro-batch
    at::Tensor tokens = feed->samples.narrow(0, index * feed->micro_batch_size, feed->micro_batch_size);
    if (tokens.device() != feed->device) tokens = tokens.to(feed->device, /*non_blocking=*/true);
    int64_t length = tokens.size(1) - 1;
    io->input_ids = release_handle(tokens.narrow(1, 0, length));
    io->label_ids = release_handle(tokens.narrow(1, 1, length));
    io->label_mask = nullptr;
    return TRIAX_OK;
  } catch (const std::exception& e) {
    std::snprintf(error->message, TRIAX_ERROR_MESSAGE_CAPACITY, "data: %s", e.what());
    return TRIAX_ERROR_RUNTIME;
  }
}

int64_t MicroBatchFeed::counted_tokens(int32_t) const { return micro_batch_size * (samples.size(1) - 1); }

}  // namespace triax
