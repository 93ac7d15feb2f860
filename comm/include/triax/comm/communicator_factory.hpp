// Chooses and connects the communication backend for a launch (parallelism.comm_backend):
//   auto  under a launcher, the first registered backend for the device (nccl on CUDA, mpi
//         otherwise); the single-process communicator for one process started by hand (on a GPU too)
//   mpi   Open MPI, CPU tensors; the processes must come from mpirun or srun (`triax launch`)
//   nccl  NCCL through c10d (CUDA builds); rendezvous through MASTER_ADDR/MASTER_PORT
// The backends are registered in comm/src/backend_registry.cpp (comm/README.md: adding one).
#pragma once

#include <memory>
#include <string>

#include "triax/comm/launch_environment.hpp"
#include "triax/comm/comm_settings.hpp"
#include "triax/core/comm/communicator.hpp"

namespace triax {

// "mpi", "nccl" or "single-process" for the given backend name and device ("cpu", "cuda", ...).
// Throws ConfigError for an unknown name or a backend that cannot serve this launch.
std::string resolve_backend(const std::string& backend, const std::string& device, const LaunchEnvironment& launch);

// The backend resolved from settings.backend and settings.device, connected over settings.shape
// with settings.timeout_seconds (comm_settings(config) fills them from a training config).
std::unique_ptr<Communicator> connect_communicator(const CommSettings& settings, const LaunchEnvironment& launch);

}  // namespace triax
