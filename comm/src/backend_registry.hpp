// The communication backends that parallelism.comm_backend can name. A backend is one file that
// defines its entry (mpi_backend.cpp, nccl_backend.cpp) plus its line in registered_backends();
// the factory (communicator_factory.cpp) knows none of them by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "triax/comm/launch_environment.hpp"
#include "triax/comm/comm_settings.hpp"
#include "triax/core/comm/communicator.hpp"

namespace triax {

// What a backend is asked to serve.
struct BackendRequest {
  std::string device;  // general.device as written
  bool cuda = false;   // whether that device is a GPU (for auto: whether this process sees one)
  LaunchEnvironment launch;
};

struct CommBackend {
  const char* name;
  // auto, under a launcher, takes the first backend registered for the run's kind of device.
  bool moves_cuda_tensors;
  // Throws ConfigError, naming parallelism.comm_backend and what to use instead, when this
  // backend cannot serve the request.
  void (*require_serves)(const BackendRequest& request);
  // Connects this process to its peers: every rank of the launch calls it.
  std::unique_ptr<Communicator> (*connect)(const CommSettings& settings, const LaunchEnvironment& launch);
};

CommBackend mpi_backend();
CommBackend nccl_backend();

// Every backend, in the order auto looks through them.
const std::vector<CommBackend>& registered_backends();

// The timeout and heartbeat every backend connects with.
CommunicatorOptions communicator_options(const CommSettings& settings);

}  // namespace triax
