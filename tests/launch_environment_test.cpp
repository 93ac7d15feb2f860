// Rendezvous variables of torchrun, mpirun and srun, and the backend choice they lead to.
#include "triax/comm/launch_environment.hpp"

#include <gtest/gtest.h>

#include <map>

#include "triax/comm/communicator_factory.hpp"
#include "triax/config/train_config.hpp"
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

std::string backend_refusal(const std::string& backend, const std::string& device, const LaunchEnvironment& launch) {
  try {
    resolve_backend(backend, device, launch);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The registry's refusals: the accepted names come from the registered backends, each check
// from its backend, auto's choice is checked like a named one.
TEST(CommunicatorFactory, RefusalsNameTheBackendsAndWhatToUseInstead) {
  const LaunchEnvironment mpirun = read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  const LaunchEnvironment torchrun = read({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(backend_refusal("gloo", "cpu", mpirun),
            "parallelism.comm_backend: unknown backend 'gloo' (expected auto, mpi or nccl)");
  EXPECT_EQ(backend_refusal("mpi", "cuda", mpirun),
            "parallelism.comm_backend: mpi moves CPU tensors, but general.device is cuda (use nccl or auto)");
  EXPECT_EQ(backend_refusal("nccl", "cpu", mpirun),
            "parallelism.comm_backend: nccl needs general.device cuda, got cpu (use mpi or auto)");
  const std::string from_torchrun =
      "the mpi backend needs processes started by mpirun or srun, but these come from torchrun";
  EXPECT_NE(backend_refusal("mpi", "cpu", torchrun).find(from_torchrun), std::string::npos);
  EXPECT_NE(backend_refusal("auto", "cpu", torchrun).find(from_torchrun), std::string::npos);
}

TEST(CommunicatorFactory, SettingsComeFromTheParallelismSectionAndTheDevice) {
  TrainConfig config;
  config.general.device = "cpu";
  config.parallelism.dp = 4;
  config.parallelism.pp = 2;
  config.parallelism.tp = 3;
  config.parallelism.expert_parallel_size = 2;
  config.parallelism.context_parallel_size = 5;
  config.parallelism.comm_backend = "mpi";
  config.parallelism.comm_timeout_seconds = 12.5;
  const CommSettings settings = comm_settings(config);
  EXPECT_EQ(settings.backend, "mpi");
  EXPECT_EQ(settings.device, "cpu");
  EXPECT_EQ(settings.shape.dp, 4);
  EXPECT_EQ(settings.shape.pp, 2);
  EXPECT_EQ(settings.shape.tp, 3);
  EXPECT_EQ(settings.shape.ep, 2);
  EXPECT_EQ(settings.shape.cp, 5);
  EXPECT_EQ(settings.timeout_seconds, 12.5);
}

TEST(CommunicatorFactory, OneProcessStartedAloneRefusesALargerMesh) {
  CommSettings settings;
  settings.device = "cpu";
  settings.shape.dp = 2;
  try {
    connect_communicator(settings, read({}));
    FAIL() << "a mesh of 2 connected in a process started alone";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("= 2 processes, but this one was started alone"), std::string::npos);
  }
  settings.shape.dp = 1;
  EXPECT_STREQ(connect_communicator(settings, read({}))->backend_name(), "single-process");
}

}  // namespace
}  // namespace triax
