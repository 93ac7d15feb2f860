#include "triax/core/step/device_mark.hpp"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace triax {

DeviceMark DeviceMark::record(const c10::Device& device) {
  DeviceMark mark;
  mark.queued_at_ = Clock::now();
  if (device.is_cpu()) return mark;
  const c10::impl::VirtualGuardImpl guard(device.type());
  const c10::Device indexed = device.has_index() ? device : guard.getDevice();
  mark.event_.emplace(device.type(), c10::EventFlag::BACKEND_DEFAULT);  // BACKEND_DEFAULT: with timing
  mark.event_->record(guard.getStream(indexed));
  return mark;
}

void DeviceMark::wait() const {
  if (event_) event_->synchronize();
}

double DeviceMark::seconds_since(const DeviceMark& earlier) const {
  wait();
  earlier.wait();
  if (event_ && earlier.event_) return earlier.event_->elapsedTime(*event_) / 1000.0;  // milliseconds
  return std::chrono::duration<double>(queued_at_ - earlier.queued_at_).count();
}

}  // namespace triax
