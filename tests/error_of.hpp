// The message of the exception of type Exception that `f` throws, or "(no error)": the tests
// compare error texts. Another exception type propagates and fails the test.
#pragma once

#include <exception>
#include <string>

namespace triax::test {

template <class Exception = std::exception, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace triax::test
