// Rendezvous variables of torchrun, mpirun and srun, and the backend choice they lead to.
#include "triax/comm/launch_environment.hpp"

#include <gtest/gtest.h>

#include <map>

#include "triax/comm/communicator_factory.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

using Variables = std::map<std::string, std::string>;

LaunchEnvironment read(const Variables& variables) {
  return LaunchEnvironment::from([&](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

std::string config_error_of(const Variables& variables) {
  try {
    read(variables);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnvironment, NothingSetIsOneProcess) {
  const LaunchEnvironment launch = read({});
  EXPECT_EQ(launch.launcher, LaunchEnvironment::Launcher::none);
  EXPECT_EQ(launch.rank, 0);
  EXPECT_EQ(launch.world_size, 1);
}

TEST(LaunchEnvironment, ReadsTorchrun) {
  const LaunchEnvironment launch = read(
      {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(launch.launcher, LaunchEnvironment::Launcher::torchrun);
  EXPECT_EQ(launch.rank, 3);
  EXPECT_EQ(launch.world_size, 8);
  EXPECT_EQ(launch.local_rank, 1);
  EXPECT_EQ(launch.master_address, "node7");
  EXPECT_EQ(launch.master_port, 29500);
}

TEST(LaunchEnvironment, ReadsMpirunAndSrun) {
  const LaunchEnvironment mpi =
      read({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(mpi.launcher, LaunchEnvironment::Launcher::mpirun);
  EXPECT_EQ(mpi.rank, 1);
  EXPECT_EQ(mpi.local_rank, 1);
  const LaunchEnvironment slurm = read({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(slurm.launcher, LaunchEnvironment::Launcher::slurm);
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.world_size, 16);
  // srun starting MPI ranks sets both; they agree.
  EXPECT_EQ(
      read({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}})
          .launcher,
      LaunchEnvironment::Launcher::mpirun);
  // An allocation's shell (SLURM_NTASKS without SLURM_PROCID) is not a launch.
  EXPECT_EQ(read({{"SLURM_NTASKS", "4"}}).launcher, LaunchEnvironment::Launcher::none);
}

TEST(LaunchEnvironment, PartialOrContradictoryVariablesAreNamed) {
  EXPECT_NE(config_error_of({{"RANK", "0"}}).find("RANK is set but WORLD_SIZE is not"), std::string::npos);
  EXPECT_NE(config_error_of({{"WORLD_SIZE", "2"}}).find("WORLD_SIZE is set but RANK is not"), std::string::npos);
  EXPECT_NE(config_error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2 is not below WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x': expected an integer"),
            std::string::npos);
  EXPECT_NE(config_error_of(
                {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}})
                .find("launchers disagree: RANK=0 WORLD_SIZE=2 but OMPI_COMM_WORLD_RANK=1"),
            std::string::npos);
  EXPECT_NE(config_error_of({{"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000"), std::string::npos);
}

TEST(CommunicatorFactory, ChoosesTheBackendFromDeviceAndLauncher) {
  const LaunchEnvironment alone = read({});
  const LaunchEnvironment mpirun = read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  const LaunchEnvironment torchrun = read({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(resolve_backend("auto", "cpu", alone), "single-process");
  EXPECT_EQ(resolve_backend("auto", "cuda", alone), "single-process");  // one GPU, no launcher
  EXPECT_EQ(resolve_backend("auto", "cpu", mpirun), "mpi");
  EXPECT_EQ(resolve_backend("auto", "cuda", torchrun), "nccl");
  EXPECT_EQ(resolve_backend("mpi", "cpu", alone), "mpi");
  EXPECT_THROW(resolve_backend("gloo", "cpu", mpirun), ConfigError);
  EXPECT_THROW(resolve_backend("mpi", "cpu", torchrun), ConfigError);
  EXPECT_THROW(resolve_backend("nccl", "cpu", mpirun), ConfigError);
  EXPECT_THROW(resolve_backend("mpi", "cuda", mpirun), ConfigError);
}

}  // namespace
}  // namespace triax
