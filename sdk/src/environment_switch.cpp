#include "triax/environment_switch.hpp"

#include <cstdlib>
#include <cstring>

namespace triax {

bool switched_on_unless_zero(const char* variable) {
  const char* value = std::getenv(variable);
  return value == nullptr || std::strcmp(value, "0") != 0;
}

bool switched_on_when_one(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

std::optional<bool> switch_forced(const char* variable) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::strcmp(value, "0") != 0;
}

bool environment_is(const char* variable, const char* expected) {
  const char* value = std::getenv(variable);
  return value != nullptr && std::strcmp(value, expected) == 0;
}

}  // namespace triax
