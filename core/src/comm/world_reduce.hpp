// One integer reduced over every rank of the world: how the ranks agree on a decision each took
// alone (every file written, a preemption signal seen somewhere).
#pragma once

#include <cstdint>

#include "triax/abi.h"

namespace triax {

class Communicator;

// MIN, MAX or SUM of `value` over the world, on the backend's device (nccl moves CUDA tensors
// only); the value itself for a single process.
int64_t world_reduce(Communicator& communicator, int64_t value, triax_reduce_op op);

}  // namespace triax
