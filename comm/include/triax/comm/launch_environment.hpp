// Where this process sits in a multi-process launch, read from the variables that launchers set:
// torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, which `triax launch` uses) and Slurm's srun
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). None set: a single process.
#pragma once

#include <functional>
#include <string>

namespace triax {

struct LaunchEnvironment {
  enum class Launcher { none, torchrun, mpirun, slurm };

  Launcher launcher = Launcher::none;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_address;  // MASTER_ADDR, empty when unset
  int master_port = 0;         // MASTER_PORT, 0 when unset

  // The variables of this process. Throws ConfigError naming the variables when they are partial
  // (RANK without WORLD_SIZE), not numbers, out of range, or when two launchers disagree.
  static LaunchEnvironment from_process();
  // The same from any lookup (nullptr = unset), for tests.
  static LaunchEnvironment from(const std::function<const char*(const char*)>& lookup);

  // "mpirun", "torchrun", "srun" or "none".
  const char* launcher_name() const;
};

}  // namespace triax
