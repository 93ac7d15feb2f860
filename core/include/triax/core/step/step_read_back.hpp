// A step's values read on the host one step late: the logged values of a training step (losses,
// gradient norm), the chosen tokens of a decoding step (triax generate).
//
// Reading them at once waits for the step's last kernel (the optimizer's), so the host launched
// the next step into an idle GPU. Instead they are copied behind the step's work and read after
// the host queued the next step's forward and backward: by then they have long arrived, and the
// GPU has work while the host writes the log line.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

#include "triax/core/step/device_mark.hpp"

namespace triax {

class StepReadBack {
 public:
  explicit StepReadBack(c10::Device device) : device_(device) {}

  struct Values {
    int64_t step = 0;
    at::Tensor host;  // the queued values, on the host
    DeviceMark done;  // behind the step's work: where its time ends
  };

  // Copies `values` (on the step's device) to the host behind the work queued so far; at most one
  // step is pending (the one before is read first).
  void queue(int64_t step, const at::Tensor& values);
  bool pending() const { return pending_.has_value(); }
  int64_t pending_step() const { return pending_ ? pending_->step : 0; }
  // Waits for the pending values (pending() must be true) and hands them over.
  Values take();

 private:
  struct Pending {
    int64_t step = 0;
    at::Tensor host;
    std::optional<DeviceMark> arrived;
  };
  c10::Device device_;
  std::optional<Pending> pending_;
};

}  // namespace triax
