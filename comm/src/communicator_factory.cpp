// The factory: picks a registered backend by name (or, for auto, by device), asks it whether it
// can serve the launch, and connects it.
#include "triax/comm/communicator_factory.hpp"

#include <ATen/Context.h>

#include "backend_registry.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

bool uses_cuda(const std::string& device) {
  return device.rfind("cuda", 0) == 0 || (device == "auto" && at::hasCUDA());
}

// "auto, mpi or nccl": the names parallelism.comm_backend accepts.
std::string accepted_names() {
  const std::vector<CommBackend>& backends = registered_backends();
  std::string names = "auto";
  for (size_t i = 0; i < backends.size(); ++i)
    names += (i + 1 == backends.size() ? " or " : ", ") + std::string(backends[i].name);
  return names;
}

const CommBackend& backend_named(const std::string& name) {
  for (const CommBackend& backend : registered_backends())
    if (name == backend.name) return backend;
  throw ConfigError("parallelism.comm_backend: unknown backend '" + name + "' (expected " + accepted_names() + ")");
}

const CommBackend& backend_for_device(bool cuda) {
  for (const CommBackend& backend : registered_backends())
    if (backend.moves_cuda_tensors == cuda) return backend;
  throw ConfigError(std::string("parallelism.comm_backend: this build has no backend for ") + (cuda ? "CUDA" : "CPU") +
                    " tensors");
}

// The backend that serves this launch, or nullptr for the single-process communicator.
const CommBackend* choose_backend(const std::string& name, const BackendRequest& request) {
  const bool launched = request.launch.launcher != LaunchEnvironment::Launcher::none;
  // One process started by hand needs no backend, on a GPU as on a CPU.
  if (name == "auto" && !launched) return nullptr;
  const CommBackend& chosen = name == "auto" ? backend_for_device(request.cuda) : backend_named(name);
  chosen.require_serves(request);
  return &chosen;
}

const CommBackend* choose_backend(const std::string& name, const std::string& device, const LaunchEnvironment& launch) {
  BackendRequest request;
  request.device = device;
  request.cuda = uses_cuda(device);
  request.launch = launch;
  return choose_backend(name, request);
}

}  // namespace

std::string resolve_backend(const std::string& backend, const std::string& device, const LaunchEnvironment& launch) {
  const CommBackend* chosen = choose_backend(backend, device, launch);
  return chosen ? chosen->name : "single-process";
}

std::unique_ptr<Communicator> connect_communicator(const CommSettings& settings, const LaunchEnvironment& launch) {
  const CommBackend* chosen = choose_backend(settings.backend, settings.device, launch);
  if (chosen) return chosen->connect(settings, launch);
  const int world_size = settings.shape.world_size();
  if (world_size != 1)
    throw ConfigError("parallelism: dp x tp x pp x context_parallel_size = " + std::to_string(world_size) +
                      " processes, but this one was started alone; start them with `triax launch -n " +
                      std::to_string(world_size) + " -- triax train ...`, mpirun, srun or torchrun");
  return std::make_unique<SingleProcessCommunicator>();
}

}  // namespace triax
