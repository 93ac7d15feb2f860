#include "backend_registry.hpp"

namespace triax {

const std::vector<CommBackend>& registered_backends() {
  static const std::vector<CommBackend> backends{mpi_backend(), nccl_backend()};
  return backends;
}

CommunicatorOptions communicator_options(const CommSettings& settings) {
  CommunicatorOptions options;
  options.timeout_seconds = settings.timeout_seconds;
  return options;
}

}  // namespace triax
