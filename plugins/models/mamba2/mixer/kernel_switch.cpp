#include "kernel_switch.hpp"

#include <cstdlib>
#include <cstring>

namespace triax::mamba2 {

bool kernel_switched_on(const char* variable) {
  const char* value = std::getenv(variable);
  return value == nullptr || std::strcmp(value, "0") != 0;
}

}  // namespace triax::mamba2
