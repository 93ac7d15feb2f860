#include "step/micro_batch_feed.hpp"

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "triax/error.hpp"
#include "triax/faults/fault_injection.hpp"
#include "triax/layers/context_parallel_slice.hpp"
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
    at::Tensor rows = feed->micro_batch(index);
    if (rows.device() != feed->device) rows = rows.to(feed->device, /*non_blocking=*/true);
    const bool documents = rows.dim() == 3;
    const at::Tensor tokens = documents ? rows.select(1, 0) : rows;
    const int64_t length = tokens.size(1) - 1;
    io->input_ids = release_handle(tokens.narrow(1, 0, length));
    io->label_ids = release_handle(tokens.narrow(1, 1, length));
    io->label_mask = nullptr;
    if (documents) pass_document_positions(rows.select(1, 1), length, io);
    if (feed->cp_size > 1) feed->keep_context_parallel_slice(length, io);
    return TRIAX_OK;
  } catch (const std::exception& e) {
    std::snprintf(error->message, TRIAX_ERROR_MESSAGE_CAPACITY, "data: %s", e.what());
    return TRIAX_ERROR_RUNTIME;
  }
}

at::Tensor MicroBatchFeed::micro_batch(int32_t index) const {
  return samples.narrow(0, index * micro_batch_size, micro_batch_size);
}

void MicroBatchFeed::pass_document_positions(const at::Tensor& positions, int64_t length, triax_stage_io* io) {
  if (io->struct_size < offsetof(triax_stage_io, position_ids) + sizeof(io->position_ids))
    throw Error(
        "model.model_config._use_doc_masking needs an engine plugin built against ABI 1.9 or later (it passes "
        "position_ids to every pipeline stage); this one's micro-batches have no room for them");
  io->position_ids = release_handle(positions.narrow(1, 0, length));
  io->label_mask = release_handle(document_label_mask(positions, length).to(at::kFloat));
}

at::Tensor MicroBatchFeed::document_label_mask(const at::Tensor& positions, int64_t length) {
  return positions.narrow(1, 1, length).ne(0);
}

void MicroBatchFeed::keep_context_parallel_slice(int64_t length, triax_stage_io* io) const {
  if (io->struct_size < offsetof(triax_stage_io, position_ids) + sizeof(io->position_ids))
    throw Error(
        "parallelism.context_parallel_size needs an engine plugin built against ABI 1.9 or later (it passes "
        "position_ids to every pipeline stage, which carry each token's place in the sequence); this one's "
        "micro-batches have no room for them");
  const ContextParallelSlice slice(length, cp_rank, cp_size);
  if (io->position_ids == nullptr) {
    const at::Tensor ids = view_handle(io->input_ids);
    io->position_ids = release_handle(at::arange(length, ids.options()).expand_as(ids).contiguous());
  }
  for (triax_tensor** tensor : {&io->input_ids, &io->label_ids, &io->label_mask, &io->position_ids}) {
    if (*tensor == nullptr) continue;
    const at::Tensor whole = adopt_handle(*tensor);
    *tensor = release_handle(slice.of(whole));
  }
}

int64_t MicroBatchFeed::counted_tokens(int32_t index) const {
  const at::Tensor rows = micro_batch(index);
  if (rows.dim() == 3) return document_label_mask(rows.select(1, 1), rows.size(2) - 1).sum().item<int64_t>();
  return micro_batch_size * (rows.size(1) - 1);
}

}  // namespace triax
