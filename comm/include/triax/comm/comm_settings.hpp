// What a communication backend is connected with: the backend's name, the device the run uses,
// the mesh and the timeout. The backends (triax_comm) read these and nothing of the config, so
// that a command that trains, one that generates and a test fill them each in their own way.
#pragma once

#include <string>

#include "triax/core/comm/parallel_context.hpp"

namespace triax {

struct TrainConfig;

struct CommSettings {
  std::string backend = "auto";  // parallelism.comm_backend: auto, or a registered backend's name
  std::string device = "auto";   // general.device: cpu, cuda, cuda:N or auto
  MeshShape shape;
  double timeout_seconds = 300;  // parallelism.comm_timeout_seconds: longest wait for a peer
};

// The settings of a training run: backend, mesh and timeout from the parallelism section, the
// device from general.device.
CommSettings comm_settings(const TrainConfig& config);

}  // namespace triax
