#include "triax/core/comm/communicator_factory.hpp"

#include <ATen/Context.h>

#include "comm/mpi_communicator.hpp"
#include "comm/nccl_communicator.hpp"
#include "triax/error.hpp"

namespace triax {

std::string resolve_backend(const std::string& backend, const std::string& device, const LaunchEnvironment& launch) {
  const bool cuda = device.rfind("cuda", 0) == 0 || (device == "auto" && at::hasCUDA());
  const bool launched = launch.launcher != LaunchEnvironment::Launcher::none;
  std::string chosen = backend;
  if (backend == "auto") {
    // One process started by hand needs no backend, on a GPU as on a CPU.
    if (!launched)
      chosen = "single-process";
    else
      chosen = cuda ? "nccl" : "mpi";
  } else if (backend != "mpi" && backend != "nccl") {
    throw ConfigError("parallelism.comm_backend: unknown backend '" + backend + "' (expected auto, mpi or nccl)");
  }
  if (chosen == "mpi" && launch.launcher == LaunchEnvironment::Launcher::torchrun)
    throw ConfigError(
        "parallelism.comm_backend: the mpi backend needs processes started by mpirun or srun, but these come from "
        "torchrun (RANK/WORLD_SIZE without OMPI_COMM_WORLD_*): run `triax launch -n N -- triax train ...` or mpirun, "
        "or use the nccl backend on GPUs");
  if (chosen == "mpi" && cuda)
    throw ConfigError("parallelism.comm_backend: mpi moves CPU tensors, but general.device is " + device +
                      " (use nccl or auto)");
  if (chosen == "nccl" && !cuda)
    throw ConfigError("parallelism.comm_backend: nccl needs general.device cuda, got " + device + " (use mpi or auto)");
  return chosen;
}

std::unique_ptr<Communicator> connect_communicator(const TrainConfig& config, const LaunchEnvironment& launch) {
  const ParallelismConfig& p = config.parallelism;
  MeshShape shape;
  shape.dp = static_cast<int>(p.dp);
  shape.pp = static_cast<int>(p.pp);
  shape.tp = static_cast<int>(p.tp);
  shape.ep = static_cast<int>(p.expert_parallel_size);
  shape.cp = static_cast<int>(p.context_parallel_size);
  CommunicatorOptions options;
  options.timeout_seconds = p.comm_timeout_seconds;
  const std::string chosen = resolve_backend(p.comm_backend, config.general.device, launch);
  if (chosen == "single-process") {
    if (shape.world_size() != 1)
      throw ConfigError("parallelism: dp x tp x pp x context_parallel_size = " + std::to_string(shape.world_size()) +
                        " processes, but this one was started alone; start them with `triax launch -n " +
                        std::to_string(shape.world_size()) + " -- triax train ...`, mpirun, srun or torchrun");
    return std::make_unique<SingleProcessCommunicator>();
  }
  if (chosen == "nccl") return make_nccl_communicator(shape, options, launch);
  return std::make_unique<MpiCommunicator>(shape, options);
}

}  // namespace triax
