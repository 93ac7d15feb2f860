// Exceptions used on either side of the plugin boundary. They never cross it: the SDK's
// adapters turn them into a triax_status plus message, and the host turns those back.
#pragma once

#include <stdexcept>
#include <string>

#include "triax/abi.h"

namespace triax {

class Error : public std::runtime_error {
 public:
  Error(triax_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  explicit Error(const std::string& message) : Error(TRIAX_ERROR_RUNTIME, message) {}
  triax_status status() const { return status_; }

 private:
  triax_status status_;
};

// A configuration value is missing, of the wrong type, or impossible. The message names the
// key's full path and what was expected; the command line exits with status 2.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(TRIAX_ERROR_INVALID_CONFIG, message) {}
};

// A plugin library or plugin name was refused; the message says which and why.
class PluginError : public Error {
 public:
  explicit PluginError(const std::string& message) : Error(TRIAX_ERROR_INVALID_ARGUMENT, message) {}
};

// Throws, as an Error with the same status and message, what a call across the plugin boundary
// reported through its triax_error (both sides of the boundary call through C vtables).
inline void throw_if_failed(triax_status status, const triax_error& error) {
  if (status != TRIAX_OK) throw Error(status, error.message);
}

}  // namespace triax
