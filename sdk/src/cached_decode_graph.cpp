#include "cached_decode_graph.hpp"

#include <ATen/ATen.h>

namespace triax {

at::Tensor CachedDecodeGraph::run(const at::Tensor& ids, const at::Tensor& positions, const Work& work) {
  if (steps_++ == 0) return work(ids, positions);
  if (!graph_) {
    ids_ = ids.clone();
    positions_ = positions.clone();
    graph_ = std::make_unique<CudaStepGraph>(ids.device());
    graph_->capture([&] { logits_ = work(ids_, positions_); });
  } else {
    ids_.copy_(ids);
    positions_.copy_(positions);
    graph_->replay();
  }
  // The next replay overwrites logits_: the caller gets its own copy.
  return logits_.clone();
}

}  // namespace triax
