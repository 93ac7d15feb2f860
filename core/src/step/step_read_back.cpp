#include "step/step_read_back.hpp"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>

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
    // Pinned, so that the copy is asynchronous; the event marks its end on the current stream.
    next.host = at::empty(values.sizes(), values.options().device(c10::kCPU).pinned_memory(true));
    next.host.copy_(values, /*non_blocking=*/true);
    const c10::impl::VirtualGuardImpl guard(device_.type());
    next.arrived.emplace(device_.type());
    next.arrived->record(guard.getStream(values.device()));
  }
  pending_ = std::move(next);
}

StepReadBack::Values StepReadBack::take() {
  if (!pending_) throw Error("no step's values are pending");
  if (pending_->arrived) pending_->arrived->synchronize();
  Values out{pending_->step, std::move(pending_->host), Clock::now()};
  pending_.reset();
  return out;
}

}  // namespace triax
