// Chooses and connects the communication backend for a launch (parallelism.comm_backend):
//   auto  under a launcher, nccl when the device is CUDA and mpi otherwise; the single-process
//         communicator for one process started by hand (on a GPU too)
//   mpi   Open MPI, CPU tensors; the processes must come from mpirun or srun (`triax launch`)
//   nccl  NCCL through c10d (CUDA builds); rendezvous through MASTER_ADDR/MASTER_PORT
#pragma once

#include <memory>
#include <string>

#include "triax/core/comm/communicator.hpp"
#include "triax/core/config.hpp"
#include "triax/core/comm/launch_environment.hpp"
#include "triax/core/comm/parallel_context.hpp"

namespace triax {

// "mpi", "nccl" or "single-process" for the given backend name and device ("cpu", "cuda", ...).
// Throws ConfigError for an unknown name or a backend that cannot serve this launch.
std::string resolve_backend(const std::string& backend, const std::string& device, const LaunchEnvironment& launch);

// The mesh (dp x pp x tp, ep), the backend and the timeout come from the config's parallelism
// section, the device from general.device.
std::unique_ptr<Communicator> connect_communicator(const TrainConfig& config, const LaunchEnvironment& launch);

}  // namespace triax
