#include "triax/device_wait.hpp"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace triax {

void wait_for_device(const c10::Device& device) {
  if (device.is_cpu()) return;
  const c10::impl::VirtualGuardImpl guard(device.type());
  guard.getStream(device).synchronize();
}

}  // namespace triax
