// A switch read from the environment: on unless the variable is set to "0", so that one build can
// compare a fused kernel with its LibTorch composition, or a feature with its absence, in one run.
#pragma once

#include <optional>

namespace triax {

// False when `variable` is set to "0", true otherwise (unset included). Where the answer must not
// change within a process, callers read it once and keep it.
bool switched_on_unless_zero(const char* variable);

// True only when `variable` is set to "1": a new path that stays off until it has been measured.
bool switched_on_when_one(const char* variable);

// True only when `variable` is set to exactly `value`: a switch between named variants of a
// kernel (such as "v1" and "v2"), read at every call.
bool environment_is(const char* variable, const char* value);

// Whether `variable` forces a choice the caller otherwise makes itself (such as a kernel layout
// picked by the batch size): unset or empty, none; else whether it is other than "0".
std::optional<bool> switch_forced(const char* variable);

}  // namespace triax
