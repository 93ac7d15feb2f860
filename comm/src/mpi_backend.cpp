// The registry's entry for `mpi`: CPU tensors between processes started by mpirun or srun.
#include "backend_registry.hpp"
#include "mpi_communicator.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

void require_mpi_serves(const BackendRequest& request) {
  if (request.launch.launcher == LaunchEnvironment::Launcher::torchrun)
    throw ConfigError(
        "parallelism.comm_backend: the mpi backend needs processes started by mpirun or srun, but these come from "
        "torchrun (RANK/WORLD_SIZE without OMPI_COMM_WORLD_*): run `triax launch -n N -- triax train ...` or mpirun, "
        "or use the nccl backend on GPUs");
  if (request.cuda)
    throw ConfigError("parallelism.comm_backend: mpi moves CPU tensors, but general.device is " + request.device +
                      " (use nccl or auto)");
}

std::unique_ptr<Communicator> connect_mpi(const CommSettings& settings, const LaunchEnvironment& /*launch*/) {
  return std::make_unique<MpiCommunicator>(settings.shape, communicator_options(settings));
}

}  // namespace

CommBackend mpi_backend() { return {"mpi", false, require_mpi_serves, connect_mpi}; }

}  // namespace triax
