// A checkpoint could not be written or read: the message names the folder or file and, where it
// applies, the tensor and what is wrong with it.
#pragma once

#include "triax/error.hpp"

namespace triax::checkpoint {

class CheckpointError : public Error {
 public:
  explicit CheckpointError(const std::string& message) : Error(TRIAX_ERROR_RUNTIME, message) {}
};

}  // namespace triax::checkpoint
