// A point in a device's queue of work, and the time between two of them: how step times are
// measured. On a device with streams it is a timing event, so the time is the device's, however
// late the host gets to read it: the host may be waiting inside the next step (an engine that
// synchronizes, a full queue) when it reads a step's values, but the step ended when its last
// kernel did. On the CPU the work is done when the host queues the mark, so it is the host's clock.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include <chrono>
#include <optional>

namespace triax {

class DeviceMark {
 public:
  using Clock = std::chrono::steady_clock;

  // A mark behind the work queued so far on `device`'s current stream.
  static DeviceMark record(const c10::Device& device);

  // Waits until the work before the mark is done.
  void wait() const;
  // Seconds from `earlier` to this mark (both of one device); waits for this one.
  double seconds_since(const DeviceMark& earlier) const;
  // When the host queued the mark.
  Clock::time_point queued_at() const { return queued_at_; }

 private:
  Clock::time_point queued_at_;
  std::optional<c10::Event> event_;  // on devices with streams
};

}  // namespace triax
