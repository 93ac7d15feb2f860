// Waits on the host until `device`'s current stream has run all the work queued on it: what a wall
// time measured around GPU work needs (a pass, a step's part, a stage's timing). Nothing on the CPU.
#pragma once

#include <c10/core/Device.h>

namespace triax {

void wait_for_device(const c10::Device& device);

}  // namespace triax
