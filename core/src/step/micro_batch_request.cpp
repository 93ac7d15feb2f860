#include "step/micro_batch_request.hpp"

#include <utility>

namespace triax {

MicroBatchRequest::MicroBatchRequest(const MicroBatchPlace& place, const ModelChunks& model, at::Tensor samples,
                                     int64_t step, int64_t micro_batches) {
  feed_.samples = std::move(samples);
  feed_.micro_batch_size = place.micro_batch_size;
  feed_.device = place.device;
  feed_.rank = place.rank;
  feed_.cp_rank = place.cp_rank;
  feed_.cp_size = place.cp_size;
  feed_.step = step;

  request_.struct_size = sizeof(request_);
  request_.model = model.refs().front();
  request_.model_count = model.chunk_count();
  request_.models = model.refs().data();
  request_.micro_batches = static_cast<int32_t>(micro_batches);
  request_.batches = {&feed_, &MicroBatchFeed::next};
}

}  // namespace triax
