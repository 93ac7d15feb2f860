#include "triax/comm/launch_environment.hpp"

#include <cstdlib>
#include <optional>
#include <vector>

#include "triax/error.hpp"

namespace triax {
namespace {

using Lookup = std::function<const char*(const char*)>;

std::optional<int> integer(const Lookup& lookup, const char* name, int minimum) {
  const char* text = lookup(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < minimum || value > 1 << 24)
    throw ConfigError(std::string("environment variable ") + name + "='" + text +
                      "': expected an integer >= " + std::to_string(minimum));
  return static_cast<int>(value);
}

// One launcher's view: rank, size, local rank (its variable names, for messages).
struct View {
  LaunchEnvironment::Launcher launcher;
  const char* rank_name;
  const char* size_name;
  const char* local_name;
  int rank = 0, size = 1, local = 0;
};

std::optional<View> read_view(const Lookup& lookup, View view) {
  const auto rank = integer(lookup, view.rank_name, 0);
  const auto size = integer(lookup, view.size_name, 1);
  if (!rank && !size) return std::nullopt;
  if (!rank || !size)
    throw ConfigError(std::string("environment: ") + (rank ? view.rank_name : view.size_name) + " is set but " +
                      (rank ? view.size_name : view.rank_name) + " is not; a launcher sets both (or unset both " +
                      "for a single process)");
  if (*rank >= *size)
    throw ConfigError(std::string("environment: ") + view.rank_name + "=" + std::to_string(*rank) + " is not below " +
                      view.size_name + "=" + std::to_string(*size));
  view.rank = *rank;
  view.size = *size;
  view.local = integer(lookup, view.local_name, 0).value_or(0);
  return view;
}

}  // namespace

LaunchEnvironment LaunchEnvironment::from_process() {
  return from([](const char* name) { return std::getenv(name); });
}

LaunchEnvironment LaunchEnvironment::from(const Lookup& lookup) {
  // First found wins; the others, when present, must agree (srun starting MPI ranks sets both).
  std::vector<View> views;
  for (View candidate :
       {View{Launcher::torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK"},
        View{Launcher::mpirun, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
        View{Launcher::slurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}}) {
    // Inside an allocation (salloc, sbatch) Slurm sets SLURM_NTASKS for the job, SLURM_PROCID
    // only for the tasks srun starts: only SLURM_PROCID says this process is one of them.
    if (candidate.launcher == Launcher::slurm && lookup("SLURM_PROCID") == nullptr) continue;
    if (auto view = read_view(lookup, candidate)) views.push_back(*view);
  }
  LaunchEnvironment environment;
  if (!views.empty()) {
    const View& chosen = views.front();
    for (const View& other : views)
      if (other.rank != chosen.rank || other.size != chosen.size)
        throw ConfigError(std::string("environment: launchers disagree: ") + chosen.rank_name + "=" +
                          std::to_string(chosen.rank) + " " + chosen.size_name + "=" + std::to_string(chosen.size) +
                          " but " + other.rank_name + "=" + std::to_string(other.rank) + " " + other.size_name + "=" +
                          std::to_string(other.size));
    environment.launcher = chosen.launcher;
    environment.rank = chosen.rank;
    environment.world_size = chosen.size;
    environment.local_rank = chosen.local;
  }
  if (const char* address = lookup("MASTER_ADDR")) environment.master_address = address;
  environment.master_port = integer(lookup, "MASTER_PORT", 1).value_or(0);
  if (environment.master_port > 65535)
    throw ConfigError("environment variable MASTER_PORT=" + std::to_string(environment.master_port) +
                      ": expected a TCP port (1..65535)");
  return environment;
}

const char* LaunchEnvironment::launcher_name() const {
  switch (launcher) {
    case Launcher::torchrun:
      return "torchrun";
    case Launcher::mpirun:
      return "mpirun";
    case Launcher::slurm:
      return "srun";
    case Launcher::none:
      break;
  }
  return "none";
}

}  // namespace triax
