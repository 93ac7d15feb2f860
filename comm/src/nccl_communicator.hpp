// The `nccl` backend (CUDA builds only): c10d's ProcessGroupNCCL, one per group of the mesh,
// rendezvous through a TCPStore on MASTER_ADDR:MASTER_PORT (rank 0 hosts it), each group under
// its own key prefix. Operations wait with parallelism.comm_timeout_seconds as their timeout.
#pragma once

#include <memory>

#include "triax/comm/launch_environment.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/comm/parallel_context.hpp"

namespace triax {

// Throws Error when this build has no CUDA (TRIAX_WITH_CUDA undefined).
std::unique_ptr<Communicator> make_nccl_communicator(const MeshShape& shape, const CommunicatorOptions& options,
                                                     const LaunchEnvironment& launch);

}  // namespace triax
