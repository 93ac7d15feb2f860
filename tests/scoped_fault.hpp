// TRIAX_FAULT (faults/include/triax/faults/fault_injection.hpp) set for the lifetime of the object, in tests
// that inject faults into runs in their own process.
#pragma once

#include <cstdlib>
#include <string>

namespace triax::testing {

struct ScopedFault {
  explicit ScopedFault(const std::string& value) { setenv("TRIAX_FAULT", value.c_str(), 1); }
  ~ScopedFault() { unsetenv("TRIAX_FAULT"); }
  ScopedFault(const ScopedFault&) = delete;
  ScopedFault& operator=(const ScopedFault&) = delete;
};

}  // namespace triax::testing
