#include "triax/core/step/step_read_back.hpp"

#include <ATen/ATen.h>

#include "triax/error.hpp"

namespace triax {

void StepReadBack::queue(int64_t step, const at::Tensor& values) {
  if (pending_) throw Error("step " + std::to_string(step) + ": the values of step " +
                            std::to_string(pending_->step) + " were queued and never read");
  Pending next;
  next.step = step;
  if (device_.is_cpu()) {
    next.host = values.clone();  // the caller may reuse its tensor
  } else {
    // Pinned, so that the copy is asynchronous; the mark after it on the current stream.
    next.host = at::empty(values.sizes(), values.options().device(c10::kCPU).pinned_memory(true));
    next.host.copy_(values, /*non_blocking=*/true);
  }
  next.arrived.emplace(DeviceMark::record(values.device()));
  pending_ = std::move(next);
}

StepReadBack::Values StepReadBack::take() {
  if (!pending_) throw Error("no step's values are pending");
  pending_->arrived->wait();
  Values out{pending_->step, std::move(pending_->host), std::move(*pending_->arrived)};
  pending_.reset();
  return out;
}

}  // namespace triax
