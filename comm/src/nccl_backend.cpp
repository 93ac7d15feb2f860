// The registry's entry for `nccl`: CUDA tensors through c10d, rendezvous on MASTER_ADDR:MASTER_PORT.
#include "backend_registry.hpp"
#include "nccl_communicator.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

void require_nccl_serves(const BackendRequest& request) {
  if (!request.cuda)
    throw ConfigError("parallelism.comm_backend: nccl needs general.device cuda, got " + request.device +
                      " (use mpi or auto)");
}

std::unique_ptr<Communicator> connect_nccl(const CommSettings& settings, const LaunchEnvironment& launch) {
  return make_nccl_communicator(settings.shape, communicator_options(settings), launch);
}

}  // namespace

CommBackend nccl_backend() { return {"nccl", true, require_nccl_serves, connect_nccl}; }

}  // namespace triax
